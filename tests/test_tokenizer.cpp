// The llama2c (SentencePiece) tokenizer against llama2.c's and llama.cpp's own encodings, from
// tokenizer.bin and from GGUF metadata; its fast merge loop against the quadratic one; bad input.
#define BOOST_TEST_MODULE tokenizer
#include <cstring>
#include <ctime>
#include <fstream>
#include <random>

#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include "glassbox/chat_template.hpp"
#include "glassbox/error.hpp"
#include "glassbox/model/metadata.hpp"
#include "glassbox/registry.hpp"
#include "registry_fixture.hpp"
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

// The key/value section of a GGUF file as Metadata: a minimal reader for these tests only (the
// project's GGUF reader is tested on its own), bounds-checked so a bad file fails the test.
glassbox::Metadata read_gguf_metadata(const fs::path& path) {
  const std::string data = gbtest::read_file(path);
  std::size_t at = 0;
  auto take = [&](std::size_t n) {
    BOOST_TEST_REQUIRE(at + n <= data.size(), path << ": truncated at byte " << at);
    const char* p = data.data() + at;
    at += n;
    return p;
  };
  auto u32 = [&] { std::uint32_t v; std::memcpy(&v, take(4), 4); return v; };
  auto u64 = [&] { std::uint64_t v; std::memcpy(&v, take(8), 8); return v; };
  auto str = [&] { const auto n = u64(); BOOST_TEST_REQUIRE(n < data.size()); return std::string(take(n), n); };
  using glassbox::MetaType;
  std::function<glassbox::MetaValue(MetaType)> value = [&](MetaType t) {
    glassbox::MetaValue v;
    v.type = t;
    switch (t) {
      case MetaType::U8: v.value = std::uint64_t(static_cast<std::uint8_t>(*take(1))); break;
      case MetaType::I8: v.value = std::int64_t(static_cast<std::int8_t>(*take(1))); break;
      case MetaType::U16: { std::uint16_t x; std::memcpy(&x, take(2), 2); v.value = std::uint64_t(x); break; }
      case MetaType::I16: { std::int16_t x; std::memcpy(&x, take(2), 2); v.value = std::int64_t(x); break; }
      case MetaType::U32: v.value = std::uint64_t(u32()); break;
      case MetaType::I32: { std::int32_t x; std::memcpy(&x, take(4), 4); v.value = std::int64_t(x); break; }
      case MetaType::F32: { float x; std::memcpy(&x, take(4), 4); v.value = double(x); break; }
      case MetaType::Bool: v.value = *take(1) != 0; break;
      case MetaType::String: v.value = str(); break;
      case MetaType::U64: v.value = u64(); break;
      case MetaType::I64: { std::int64_t x; std::memcpy(&x, take(8), 8); v.value = x; break; }
      case MetaType::F64: { double x; std::memcpy(&x, take(8), 8); v.value = x; break; }
      case MetaType::Array: {
        v.elem = static_cast<MetaType>(u32());
        const auto n = u64();
        BOOST_TEST_REQUIRE(n < data.size());
        std::vector<glassbox::MetaValue> items;
        for (std::uint64_t i = 0; i < n; ++i) items.push_back(value(v.elem));
        v.value = std::move(items);
        break;
      }
      default: BOOST_FAIL(path << ": unknown GGUF value type " << static_cast<int>(t));
    }
    return v;
  };
  BOOST_TEST_REQUIRE(std::string(take(4), 4) == "GGUF");
  u32();  // version
  u64();  // tensor count
  const auto n_kv = u64();
  glassbox::Metadata m;
  m.source = path.string();
  for (std::uint64_t i = 0; i < n_kv; ++i) {
    std::string key = str();
    m.set(std::move(key), value(static_cast<MetaType>(u32())));
  }
  return m;
}

const glassbox::Metadata& stories_gguf() {
  static const glassbox::Metadata m = read_gguf_metadata(gbtest::shared("gguf/stories260K-f32.gguf"));
  return m;
}

using gbtest::registry;  // the default registry, loaded once (registry_fixture.hpp)

std::unique_ptr<glassbox::Tokenizer> from_metadata(const glassbox::Metadata& m, bool reference = false) {
  return registry().make_tokenizer({"llama2c", {{"reference_merge", reference ? "true" : "false"}}}, m);
}

// Random text that exercises merges: vocabulary pieces glued together, spaces, newlines, CJK, emoji,
// stray bytes (invalid UTF-8 included) and "<s>"-like control spellings.
std::vector<std::string> random_texts(const glassbox::Tokenizer& tok, int count, unsigned seed) {
  std::mt19937 rng(seed);
  const std::vector<std::string> extra = {" ", "  ", "\n", "\t", "日本", "😀", "é", "<s>", "</s>", "<unk>", "<0x0A>", "\xff", "\xe2\x96"};
  std::vector<std::string> out;
  for (int i = 0; i < count; ++i) {
    std::string s;
    const int parts = std::uniform_int_distribution<int>(0, 40)(rng);
    for (int k = 0; k < parts; ++k) {
      if (rng() % 4 == 0) {
        s += extra[rng() % extra.size()];
      } else {
        std::string p(tok.piece(static_cast<std::int32_t>(rng() % tok.vocab_size())));
        if (p.size() > 2 && p[0] == '<' && p.back() == '>') continue;  // byte and control pieces
        for (std::size_t q; (q = p.find("\xE2\x96\x81")) != std::string::npos;) p.replace(q, 3, " ");
        s += p;
      }
    }
    out.push_back(s);
  }
  return out;
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

// ---- Control tokens spelled in text (EncodeOptions::parse_special) ----

glassbox::EncodeOptions special(std::span<const glassbox::TextRange> ranges = {}) {
  glassbox::EncodeOptions o;
  o.parse_special = true;
  o.special_ranges = ranges;
  return o;
}

// The vocabularies as llama.cpp's converter typed them (GGUF: <unk> unknown, <s> </s> control) and
// as the llama2.c files imply: every control or unknown token's spelling is its own id with
// parse_special, and the plain text otherwise, which never holds a control id.
BOOST_DATA_TEST_CASE(every_special_token_is_one_id_only_when_parsed, bdata::make({"tok512.bin", "tokenizer.bin", "gguf"}), which) {
  glassbox::Registry reg;
  reg.load_default();
  const std::string w = which;
  auto t = w == "gguf" ? reg.make_tokenizer({"llama2c", {}}, stories_gguf()) : nullptr;
  const glassbox::Tokenizer& tok = t ? *t : tokenizer(w);
  int n = 0;
  for (std::int32_t id = 0; id < tok.vocab_size(); ++id) {
    const auto type = tok.token_type(id);
    if (type != glassbox::TokenType::Control && type != glassbox::TokenType::Unknown) continue;
    ++n;
    // llama2.c's files store BOS as "\n<s>\n": it is spelled "<s>", as llama.cpp's converter names it.
    std::string text(tok.piece(id));
    text = text.substr(text.find_first_not_of('\n'));
    text = text.substr(0, text.find_last_not_of('\n') + 1);
    BOOST_TEST(tok.encode(text, special()) == std::vector<std::int32_t>{id}, w << " " << text);
    const auto plain = tok.encode(text, false, false);
    BOOST_TEST(plain.size() > 1u, w << " " << text);
    for (auto p : plain) BOOST_TEST((tok.token_type(p) != glassbox::TokenType::Control), w << " " << text);
    BOOST_TEST(glassbox::decode_all(tok, plain) == text);  // (decode_all drops the dummy-prefix space)
  }
  BOOST_TEST(n == 3);  // <unk> <s> </s>
}

// llama.cpp's SPM rule: text is split at special tokens and every stretch between them is encoded
// on its own, dummy-prefix space included; BOS/EOS framing is unchanged.
BOOST_AUTO_TEST_CASE(parse_special_encodes_each_stretch_on_its_own) {
  const auto& t = tokenizer("tok512.bin");
  auto plain = [&](const char* s) { return t.encode(s, false, false); };
  std::vector<std::int32_t> expect = {1};
  for (auto id : plain("Once upon")) expect.push_back(id);
  expect.push_back(2);
  expect.push_back(1);
  for (auto id : plain("a time")) expect.push_back(id);
  glassbox::EncodeOptions o = special();
  o.bos = true;
  BOOST_TEST(t.encode("Once upon</s><s>a time", o) == expect, boost::test_tools::per_element());
  // Only inside the ranges: the second "<s>" (bytes 4..7) is text.
  const std::vector<glassbox::TextRange> first{{0, 3}};
  std::vector<std::int32_t> ranged = {1};
  for (auto id : plain("x<s>")) ranged.push_back(id);
  BOOST_TEST(t.encode("<s>x<s>", special(first)) == ranged, boost::test_tools::per_element());
  // A range that cuts a spelling in two does not match it.
  const std::vector<glassbox::TextRange> cut{{0, 2}};
  BOOST_TEST(t.encode("<s>", special(cut)) == plain("<s>"), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(cli_tokenize_parse_special) {
  const std::string tok = gbtest::shared("models/tok512.bin").string();
  auto r = gbtest::run_cli({"tokenize", "--json", "--no-bos", "--parse-special", "--tokenizer", tok, "</s>"});
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  BOOST_TEST(json::parse(r.out)["ids"] == json::array({2}));
  // a control token is given by its name (llama2.c's vocabulary spells it "\n</s>\n"), marked special
  BOOST_TEST(json::parse(r.out)["pieces"] == json::array({"</s>"}));
  BOOST_TEST(json::parse(r.out)["special"] == json::array({true}));
  auto plain = gbtest::run_cli({"tokenize", "--json", "--no-bos", "--tokenizer", tok, "</s>"});
  BOOST_TEST_REQUIRE(plain.rc == 0, plain.err);
  BOOST_TEST(json::parse(plain.out)["ids"] == json(tokenizer("tok512.bin").encode("</s>", false, false)));
}

// Llama 2's chat format marks turns with <s> and </s>, control tokens of tok512: encode_chat makes
// the template's markers control ids and leaves a user's "</s>" and "<s>" as text.
BOOST_AUTO_TEST_CASE(chat_markers_become_control_tokens_user_text_never_does) {
  const auto& t = tokenizer("tok512.bin");
  using glassbox::ChatFormat;
  const std::vector<glassbox::ChatMessage> chat = {
      {"user", "Hi </s> there <s>"}, {"assistant", "Yo"}, {"user", "<unk> and </s>"}};
  const auto ids = glassbox::encode_chat(t, ChatFormat::Llama2, chat);
  // "<s>[INST] Hi </s> there <s> [/INST] Yo </s><s>[INST] <unk> and </s> [/INST]": BOS, then one
  // </s> and one <s> from the template; the user's spellings stay text.
  std::vector<std::int32_t> controls;
  for (auto id : ids)
    if (t.token_type(id) != glassbox::TokenType::Normal && t.token_type(id) != glassbox::TokenType::Byte) controls.push_back(id);
  BOOST_TEST(controls == (std::vector<std::int32_t>{1, 2, 1}), boost::test_tools::per_element());
  BOOST_TEST(glassbox::decode_all(t, ids).find("Hi </s> there <s>") != std::string::npos);
  // The same text with every special spelling parsed would have let the user's through.
  glassbox::EncodeOptions all = special();
  all.bos = true;
  int parsed = 0;
  for (auto id : t.encode(glassbox::render_chat(ChatFormat::Llama2, chat), all)) parsed += id <= 2;
  BOOST_TEST(parsed == 7);
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

// ---- The heap merge loop against the quadratic reference ----

BOOST_AUTO_TEST_SUITE(merge_loop, *boost::unit_test::precondition(gbtest::NeedsShared()))

BOOST_DATA_TEST_CASE(heap_merges_equal_quadratic_merges, bdata::make({"tok512.bin", "tokenizer.bin"}), file) {
  const std::string path = gbtest::shared(std::string("models/") + file).string();
  auto fast = registry().make_tokenizer({"llama2c", {{"path", path}}});
  auto slow = registry().make_tokenizer({"llama2c", {{"path", path}, {"reference_merge", "true"}}});
  int checked = 0;
  for (const auto& text : random_texts(*fast, 400, 7)) {
    const auto a = fast->encode(text, true, false), b = slow->encode(text, true, false);
    BOOST_TEST(a == b, json(text).dump(-1, ' ', true, json::error_handler_t::replace));
    BOOST_TEST(glassbox::decode_all(*fast, a) == text);
    ++checked;
  }
  BOOST_TEST(checked == 400);
}

BOOST_AUTO_TEST_CASE(a_megabyte_prompt_encodes_quickly) {
  auto tok = registry().make_tokenizer({"llama2c", {{"path", gbtest::shared("models/tokenizer.bin").string()}}});
  std::string text;
  const auto parts = random_texts(*tok, 2000, 11);
  while (text.size() < (1u << 20))
    for (const auto& p : parts) text += p + " ";
  // CPU time, not wall time: test machines are shared.
  const std::clock_t t0 = std::clock();
  const auto ids = tok->encode(text, true, false);
  const double s = static_cast<double>(std::clock() - t0) / CLOCKS_PER_SEC;
  BOOST_TEST_MESSAGE("1 MiB prompt: " << ids.size() << " tokens in " << s << " s CPU");
  BOOST_TEST(s < 2.0 * gbtest::kTimeScale);
  BOOST_TEST(glassbox::decode_all(*tok, ids) == text);
}

BOOST_AUTO_TEST_SUITE_END()

// ---- SentencePiece from GGUF metadata (tokenizer.ggml.model = llama) ----

BOOST_AUTO_TEST_SUITE(spm_from_gguf_metadata, *boost::unit_test::precondition(gbtest::NeedsShared()))

BOOST_AUTO_TEST_CASE(prompt_ids_match_llama_cpp) {
  auto tok = from_metadata(stories_gguf());
  int n = 0;
  for (const auto& j : gbtest::read_jsonl(gbtest::shared("golden/llamacpp-stories260K-f32.jsonl"))) {
    const std::string prompt = j["prompt"];
    const auto expect = j["prompt_ids"].get<std::vector<std::int32_t>>();
    BOOST_TEST(tok->encode(prompt, tok->add_bos(), false) == expect, boost::test_tools::per_element());
    BOOST_TEST(glassbox::decode_all(*tok, expect) == prompt);
    ++n;
  }
  BOOST_TEST(n == 3);
  // gguf/README.md (b), as written there.
  BOOST_TEST(tok->encode("Once upon a time", true, false) == (std::vector<std::int32_t>{1, 403, 407, 261, 378}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(gguf_vocabulary_encodes_like_the_llama2c_file) {
  auto gguf = from_metadata(stories_gguf());
  const auto& bin = tokenizer("tok512.bin");
  BOOST_TEST(gguf->vocab_size() == bin.vocab_size());
  for (const auto& c : cases())
    if (c.tokenizer == "tok512.bin") BOOST_TEST(gguf->encode(c.text, true, false) == c.ids, boost::test_tools::per_element());
  for (const auto& text : random_texts(bin, 300, 3)) {
    const auto a = gguf->encode(text, true, false);
    BOOST_TEST(a == bin.encode(text, true, false), json(text).dump(-1, ' ', true, json::error_handler_t::replace));
    BOOST_TEST(a == from_metadata(stories_gguf(), true)->encode(text, true, false));
    BOOST_TEST(glassbox::decode_all(*gguf, a) == text);
  }
}

BOOST_AUTO_TEST_CASE(special_tokens_types_and_policy) {
  auto tok = from_metadata(stories_gguf());
  BOOST_TEST(tok->model_kind() == "llama");
  BOOST_TEST(tok->bos_id() == 1);
  BOOST_TEST(tok->eos_id() == 2);
  BOOST_TEST(tok->add_bos());
  BOOST_TEST(!tok->add_eos());
  BOOST_TEST(tok->eog_ids() == (std::vector<std::int32_t>{2}), boost::test_tools::per_element());
  BOOST_TEST(glassbox::token_type_name(tok->token_type(0)) == "unknown");
  BOOST_TEST(glassbox::token_type_name(tok->token_type(1)) == "control");
  BOOST_TEST(glassbox::token_type_name(tok->token_type(13)) == "byte");
  BOOST_TEST(glassbox::token_type_name(tok->token_type(300)) == "normal");
  BOOST_TEST(tok->piece(259) == "\xE2\x96\x81t");  // "▁t": GGUF spells the space U+2581
  BOOST_TEST(tok->decode(5, 259) == " t");
  BOOST_TEST(tok->decode(1, 259) == "t");  // after BOS the dummy-prefix space goes
  BOOST_TEST(tok->decode(5, 13) == "\n");
  BOOST_TEST(tok->decode(5, 1).empty());  // control tokens print nothing
  BOOST_TEST(tok->decode(5, 2).empty());
  // Control spellings in text are text, not control tokens.
  for (const char* text : {"<s>", "</s>", "a </s> b", "<unk>"}) {
    const auto ids = tok->encode(text, false, false);
    BOOST_TEST(std::count(ids.begin(), ids.end(), 1) + std::count(ids.begin(), ids.end(), 2) == 0, text);
    BOOST_TEST(glassbox::decode_all(*tok, ids) == text);
  }
  BOOST_TEST(tok->chat_template().empty());
}

BOOST_AUTO_TEST_CASE(metadata_keys_set_the_policy) {
  glassbox::Metadata m = stories_gguf();
  auto u32 = [](std::uint64_t v) { return glassbox::MetaValue{glassbox::MetaType::U32, glassbox::MetaType::U8, v}; };
  auto boolean = [](bool v) { return glassbox::MetaValue{glassbox::MetaType::Bool, glassbox::MetaType::U8, v}; };
  auto ty = m.get_ints("tokenizer.ggml.token_type").value();
  auto toks = m.get_strings("tokenizer.ggml.tokens").value();
  // Make id 300 a control token spelled <|im_end|> and id 301 the end-of-turn token.
  std::vector<glassbox::MetaValue> tv, sv;
  for (std::size_t i = 0; i < ty.size(); ++i) {
    const std::int64_t t = i == 300 ? 3 : ty[i];
    tv.push_back({glassbox::MetaType::I32, glassbox::MetaType::U8, t});
    sv.push_back({glassbox::MetaType::String, glassbox::MetaType::U8, i == 300 ? std::string("<|im_end|>") : toks[i]});
  }
  m.set("tokenizer.ggml.token_type", {glassbox::MetaType::Array, glassbox::MetaType::I32, tv});
  m.set("tokenizer.ggml.tokens", {glassbox::MetaType::Array, glassbox::MetaType::String, sv});
  m.set("tokenizer.ggml.eot_token_id", u32(301));
  m.set("tokenizer.ggml.add_bos_token", boolean(false));
  m.set("tokenizer.ggml.add_eos_token", boolean(true));
  m.set("tokenizer.chat_template", {glassbox::MetaType::String, glassbox::MetaType::U8, std::string("{{ messages }}")});
  auto tok = from_metadata(m);
  BOOST_TEST(!tok->add_bos());
  BOOST_TEST(tok->add_eos());
  BOOST_TEST(tok->eog_ids() == (std::vector<std::int32_t>{2, 301, 300}), boost::test_tools::per_element());
  BOOST_TEST(tok->is_eog(300));
  BOOST_TEST(tok->chat_template() == "{{ messages }}");
  BOOST_TEST(tok->decode(5, 300).empty());
  const auto ids = tok->encode("<|im_end|>", false, false);
  BOOST_TEST(std::count(ids.begin(), ids.end(), 300) == 0);

  m.set("tokenizer.ggml.bos_token_id", u32(0xFFFFFFFFu));
  m.set("tokenizer.ggml.add_bos_token", boolean(true));
  BOOST_CHECK_THROW(from_metadata(m), glassbox::TokenizerError);  // BOS to add, but none named
  m.set("tokenizer.ggml.bos_token_id", u32(512));
  BOOST_CHECK_THROW(from_metadata(m), glassbox::TokenizerError);  // outside the vocabulary
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_CASE(metadata_of_another_kind_or_none_is_refused) {
  glassbox::Metadata m;
  try {
    from_metadata(m);
    BOOST_FAIL("accepted empty metadata");
  } catch (const glassbox::ConfigError& e) {
    BOOST_TEST(std::string(e.what()).find("parameter 'path'") != std::string::npos, e.what());
  }
  m.set("tokenizer.ggml.model", {glassbox::MetaType::String, glassbox::MetaType::U8, std::string("gpt2")});
  try {
    from_metadata(m);
    BOOST_FAIL("accepted gpt2 metadata");
  } catch (const glassbox::ConfigError& e) {
    BOOST_TEST(std::string(e.what()).find("'bpe'") != std::string::npos, e.what());
  }
  m.set("tokenizer.ggml.model", {glassbox::MetaType::String, glassbox::MetaType::U8, std::string("llama")});
  BOOST_CHECK_THROW(from_metadata(m), glassbox::TokenizerError);  // no tokens
}
