// glassbox/codec.hpp: SHA-256 on the FIPS 180-4 example messages, and the portable SHA-256 and base64 against
// OpenSSL's on random inputs split at random points (where this machine has OpenSSL; the build may use either).
#define BOOST_TEST_MODULE codec
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <random>
#include <string>
#include <vector>

#if GBTEST_HAVE_OPENSSL
#include <openssl/evp.h>
#endif

#include "glassbox/codec.hpp"

namespace bdata = boost::unit_test::data;
using glassbox::hex;

namespace {
std::string portable_hex(const std::string& msg) {
  glassbox::portable::Sha256 s;
  s.update(msg.data(), msg.size());
  return hex(s.finish());
}
std::string build_hex(const std::string& msg) { return hex(glassbox::sha256(msg.data(), msg.size())); }

// Random bytes of a random length (mostly short, around the 55/56/64-byte padding edges, some long).
std::string random_bytes(std::mt19937& rng) {
  static const std::size_t lengths[] = {0, 1, 3, 55, 56, 57, 63, 64, 65, 119, 120, 127, 128, 129, 1000, 4096, 100003};
  const std::size_t n = rng() % 3 == 0 ? lengths[rng() % std::size(lengths)] : rng() % 300;
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

#if GBTEST_HAVE_OPENSSL
std::string openssl_hex(const std::string& msg) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  BOOST_TEST_REQUIRE(EVP_Digest(msg.data(), msg.size(), md, &len, EVP_sha256(), nullptr) == 1);
  return hex({md, len});
}
#endif
}  // namespace

// FIPS 180-4's examples (NIST's "SHA256.pdf", "SHA2_Additional.pdf"): the one-block, the two-block and the
// 896-bit message, the empty one and a million 'a's.
BOOST_DATA_TEST_CASE(sha256_gives_the_standards_digests,
                     bdata::make({std::string("abc"), std::string(""),
                                  std::string("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
                                  std::string("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu"),
                                  std::string(1000000, 'a')}) ^
                         bdata::make({"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
                                      "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
                                      "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
                                      "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1",
                                      "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"}),
                     msg, digest) {
  BOOST_TEST(portable_hex(msg) == digest);
  BOOST_TEST(build_hex(msg) == digest);  // the build's implementation (OpenSSL's or the portable one)
  BOOST_TEST_MESSAGE("this build's SHA-256: " << glassbox::Sha256::implementation());
}

// update() in pieces gives the digest of the whole, whatever the cuts (inside a block, at its edges).
BOOST_AUTO_TEST_CASE(sha256_in_pieces_equals_sha256_of_the_whole) {
  std::mt19937 rng(7);
  for (int round = 0; round < 300; ++round) {
    const std::string msg = random_bytes(rng);
    glassbox::portable::Sha256 p;
    glassbox::Sha256 b;
    for (std::size_t at = 0; at < msg.size();) {
      const std::size_t n = std::min<std::size_t>(msg.size() - at, rng() % 3 == 0 ? 64 : rng() % 150);
      p.update(msg.data() + at, n);
      b.update(msg.data() + at, n);
      at += n;
    }
    const std::string whole = portable_hex(msg);
    BOOST_TEST(hex(p.finish()) == whole, "length " << msg.size());
    BOOST_TEST(hex(b.finish()) == whole, "length " << msg.size());
  }
}

BOOST_DATA_TEST_CASE(base64_gives_rfc_4648s_examples,
                     bdata::make({"", "f", "fo", "foo", "foob", "fooba", "foobar"}) ^
                         bdata::make({"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"}),
                     text, code) {
  const std::string in = text;
  for (auto encode : {&glassbox::base64_encode, &glassbox::portable::base64_encode}) {
    std::string out(glassbox::base64_size(in.size()), '?');
    BOOST_TEST(encode(in.data(), in.size(), out.data()) == out.data() + out.size());
    BOOST_TEST(out == std::string(code));
  }
  std::vector<std::uint8_t> back(std::string(code).size() / 4 * 3 + 1);
  const auto n = glassbox::base64_decode(code, back.data());
  BOOST_TEST_REQUIRE(n == static_cast<std::ptrdiff_t>(in.size()));
  BOOST_TEST(std::string(back.begin(), back.begin() + n) == in);
}

BOOST_DATA_TEST_CASE(base64_refuses_what_is_not_strict_base64,
                     bdata::make({"Zg=", "Z===", "Zg==Zg==", " Zg==", "Zm9v\n", "Zm=v", "Zm9v====", "Zm9-", "=Zm9", "Zg=A"}), code) {
  std::vector<std::uint8_t> back(16);
  BOOST_TEST(glassbox::base64_decode(code, back.data()) == -1, code);
}

#if GBTEST_HAVE_OPENSSL
BOOST_AUTO_TEST_CASE(portable_sha256_and_base64_equal_openssls_on_random_inputs) {
  std::mt19937 rng(2024);
  for (int round = 0; round < 500; ++round) {
    const std::string msg = random_bytes(rng);
    BOOST_TEST(portable_hex(msg) == openssl_hex(msg), "length " << msg.size());
    std::string mine(glassbox::base64_size(msg.size()), '?'), theirs(glassbox::base64_size(msg.size()) + 1, '?');
    glassbox::portable::base64_encode(msg.data(), msg.size(), mine.data());
    theirs.resize(EVP_EncodeBlock(reinterpret_cast<unsigned char*>(theirs.data()), reinterpret_cast<const unsigned char*>(msg.data()),
                                  static_cast<int>(msg.size())));
    BOOST_TEST(mine == theirs, "length " << msg.size());
    std::vector<std::uint8_t> back(mine.size() / 4 * 3);
    const auto n = glassbox::portable::base64_decode(mine, back.data());
    BOOST_TEST_REQUIRE(n == static_cast<std::ptrdiff_t>(msg.size()));
    BOOST_TEST(std::string(back.begin(), back.begin() + n) == msg);
  }
}
#else
BOOST_AUTO_TEST_CASE(portable_sha256_and_base64_equal_openssls_on_random_inputs, *boost::unit_test::disabled()) {}
#endif
