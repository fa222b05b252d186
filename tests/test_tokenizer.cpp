// The llama2c tokenizer against llama2.c's own encodings, decoding back, and bad tokenizer files.
#define BOOST_TEST_MODULE tokenizer
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include "glassbox/error.hpp"
#include "glassbox/registry.hpp"
#include "support.hpp"

namespace bdata = boost::unit_test::data;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct Case {
  std::string tokenizer;  // file under shared/models
  std::string text;
  std::vector<std::int32_t> ids;
};
std::ostream& operator<<(std::ostream& os, const Case& c) { return os << c.tokenizer << ": " << json(c.text).dump(); }

std::vector<Case> cases() {
  std::vector<Case> out;
  if (!gbtest::shared_dir()) return out;
  for (const auto& [golden, tok] : {std::pair{"golden/llama2c-tok512.jsonl", "tok512.bin"},
                                    std::pair{"golden/llama2c-tokenizer32k.jsonl", "tokenizer.bin"}})
    for (const auto& j : gbtest::read_jsonl(gbtest::shared(golden)))
      out.push_back({tok, j["text"], j["ids"].get<std::vector<std::int32_t>>()});
  return out;
}

const glassbox::Tokenizer& tokenizer(const std::string& file) {
  static glassbox::Registry reg;
  static std::map<std::string, std::unique_ptr<glassbox::Tokenizer>> cache;
  if (cache.empty()) reg.load_default();
  auto& t = cache[file];
  if (!t) t = reg.make_tokenizer({"llama2c", {{"path", gbtest::shared("models/" + file).string()}}});
  return *t;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(llama2c_reference, *boost::unit_test::precondition(gbtest::NeedsShared()))

BOOST_DATA_TEST_CASE(encode_matches_llama2c, bdata::make(cases()), c) {
  const auto ids = tokenizer(c.tokenizer).encode(c.text, true, false);
  BOOST_TEST(ids == c.ids, boost::test_tools::per_element());
}

BOOST_DATA_TEST_CASE(decode_gives_back_the_text, bdata::make(cases()), c) {
  BOOST_TEST(glassbox::decode_all(tokenizer(c.tokenizer), c.ids) == c.text);
}

BOOST_DATA_TEST_CASE(cli_tokenize_json_matches_llama2c, bdata::make(cases()), c) {
  auto r = gbtest::run_cli({"tokenize", "--json", "--tokenizer", gbtest::shared("models/" + c.tokenizer).string(), c.text});
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  const auto j = json::parse(r.out);
  const std::vector<std::int32_t> ids = j["ids"];
  BOOST_TEST(ids == c.ids, boost::test_tools::per_element());
  BOOST_TEST(j["pieces"].size() == c.ids.size());
}

BOOST_AUTO_TEST_CASE(special_ids_and_sizes) {
  const auto& t = tokenizer("tok512.bin");
  BOOST_TEST(t.vocab_size() == 512);
  BOOST_TEST(t.bos_id() == 1);
  BOOST_TEST(t.eos_id() == 2);
  BOOST_TEST(tokenizer("tokenizer.bin").vocab_size() == 32000);
  // Byte fallback: <0x0A> decodes to a newline, and BOS drops the dummy-prefix space.
  BOOST_TEST(t.piece(13) == "<0x0A>");
  BOOST_TEST(t.decode(5, 13) == "\n");
  const auto ids = t.encode("Once", true, true);
  BOOST_TEST(ids.back() == 2);
  BOOST_TEST(t.decode(1, ids[1]).substr(0, 1) != " ");
}

BOOST_AUTO_TEST_SUITE_END()

// ---- Bad tokenizer files ----

BOOST_DATA_TEST_CASE(bad_tokenizer_file_is_refused,
                     bdata::make({std::string(""), std::string("\x05\x00\x00\x00", 4), std::string("\xff\xff\xff\x7f", 4),
                                  std::string("\x05\x00\x00\x00\x00\x00\x80\x3f\x09\x00\x00\x00", 12)}) ^
                         bdata::make({"shorter than its 4-byte header", "only 0 tokens", "max_token_length",
                                      "length 9 is not in 0..5"}),
                     bytes, expect) {
  glassbox::Registry reg;
  reg.load_default();
  const fs::path dir = gbtest::temp_dir("badtok");
  const fs::path f = dir / "tok.bin";
  gbtest::write_file(f, bytes);
  try {
    reg.make_tokenizer({"llama2c", {{"path", f.string()}}});
    BOOST_FAIL("accepted a bad tokenizer file");
  } catch (const glassbox::TokenizerError& e) {
    const std::string msg = e.what();
    BOOST_TEST(msg.find(f.string()) != std::string::npos, msg);
    BOOST_TEST(msg.find(expect) != std::string::npos, msg);
  }
  BOOST_CHECK_THROW(reg.make_tokenizer({"llama2c", {{"path", (dir / "missing.bin").string()}}}), glassbox::TokenizerError);
  fs::remove_all(dir);
}
