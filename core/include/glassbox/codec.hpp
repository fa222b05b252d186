// SHA-256 (FIPS 180-4) and base64 (RFC 4648, padded, no line breaks): everything glassbox once called OpenSSL
// for, behind one interface. OpenSSL's libcrypto does the work where the build found it (GLASSBOX_OPENSSL);
// otherwise a portable implementation (core/src/codec_portable.cpp) does, which is always built so that the
// tests can check it against OpenSSL. Both give the same bytes: these are the model digests in trace headers
// and the float arrays of full traces.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace glassbox {

using Sha256Digest = std::array<std::uint8_t, 32>;

// Incremental SHA-256: update() any number of times, then finish() once.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(const void* data, std::size_t size);
  Sha256Digest finish();
  // "openssl" or "portable": which implementation this build uses.
  static const char* implementation();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// SHA-256 of one buffer, and a digest as 64 lowercase hex digits.
Sha256Digest sha256(const void* data, std::size_t size);
std::string hex(std::span<const std::uint8_t> bytes);

// Base64 of `size` bytes into `out` (room for base64_size(size) chars; no terminator); returns the end.
constexpr std::size_t base64_size(std::size_t size) { return (size + 2) / 3 * 4; }
char* base64_encode(const void* data, std::size_t size, char* out);
// Decodes strict base64 (the standard alphabet, a multiple of 4 characters, '=' only as the last one or two,
// no blanks or line breaks) into `out` (room for text.size() / 4 * 3 bytes); returns the number of bytes, or
// -1 when the text is not such base64. Bits the padding drops are ignored, as OpenSSL's decoder does.
std::ptrdiff_t base64_decode(std::string_view text, std::uint8_t* out);

// The portable implementation, whichever the build uses (the tests compare the two).
namespace portable {
class Sha256 {
 public:
  void update(const void* data, std::size_t size);
  Sha256Digest finish();

 private:
  void block(const std::uint8_t* p);
  std::uint32_t h_[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  std::uint8_t buf_[64] = {};
  std::size_t used_ = 0;      // bytes waiting in buf_
  std::uint64_t total_ = 0;   // bytes hashed so far
};
char* base64_encode(const void* data, std::size_t size, char* out);
std::ptrdiff_t base64_decode(std::string_view text, std::uint8_t* out);
}  // namespace portable

}  // namespace glassbox
