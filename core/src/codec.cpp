// SHA-256 and base64 through OpenSSL's libcrypto where the build has it (GLASSBOX_HAVE_OPENSSL), through the
// portable implementation (codec_portable.cpp) where it does not; glassbox/codec.hpp is the one interface.
#include "glassbox/codec.hpp"

#include "glassbox/error.hpp"

#if GLASSBOX_HAVE_OPENSSL
#include <openssl/evp.h>
#endif

namespace glassbox {

#if GLASSBOX_HAVE_OPENSSL
struct Sha256::State {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx{EVP_MD_CTX_new(), EVP_MD_CTX_free};
};
Sha256::Sha256() : state_(std::make_unique<State>()) {
  if (!state_->ctx || EVP_DigestInit_ex(state_->ctx.get(), EVP_sha256(), nullptr) != 1) throw Error("SHA-256: OpenSSL failed to start a digest");
}
void Sha256::update(const void* data, std::size_t size) {
  if (EVP_DigestUpdate(state_->ctx.get(), data, size) != 1) throw Error("SHA-256: OpenSSL failed to hash");
}
Sha256Digest Sha256::finish() {
  Sha256Digest out;
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(state_->ctx.get(), out.data(), &len) != 1 || len != out.size()) throw Error("SHA-256: OpenSSL failed to finish");
  return out;
}
const char* Sha256::implementation() { return "openssl"; }

char* base64_encode(const void* data, std::size_t size, char* out) {
  // EVP_EncodeBlock takes an int length: pieces of 3·2^20 bytes (whole groups, so no padding but the last).
  constexpr std::size_t kPiece = 3u << 20;
  const auto* p = static_cast<const unsigned char*>(data);
  do {
    const std::size_t n = std::min(kPiece, size);
    out += EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out), p, static_cast<int>(n));
    p += n;
    size -= n;
  } while (size > 0);
  return out;
}
#else
struct Sha256::State {
  portable::Sha256 sha;
};
Sha256::Sha256() : state_(std::make_unique<State>()) {}
void Sha256::update(const void* data, std::size_t size) { state_->sha.update(data, size); }
Sha256Digest Sha256::finish() { return state_->sha.finish(); }
const char* Sha256::implementation() { return "portable"; }

char* base64_encode(const void* data, std::size_t size, char* out) { return portable::base64_encode(data, size, out); }
#endif
Sha256::~Sha256() = default;

// Decoding is always the portable code: it must refuse what OpenSSL's EVP_DecodeBlock lets through (blanks,
// padding in the middle), which took a pass over the text before OpenSSL's own anyway.
std::ptrdiff_t base64_decode(std::string_view text, std::uint8_t* out) { return portable::base64_decode(text, out); }

Sha256Digest sha256(const void* data, std::size_t size) {
  Sha256 s;
  s.update(data, size);
  return s.finish();
}

std::string hex(std::span<const std::uint8_t> bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes.size());
  for (std::uint8_t b : bytes) {
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

}  // namespace glassbox
