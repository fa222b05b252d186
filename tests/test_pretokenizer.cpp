// The bpe tokenizer's pre-tokenizer (plugins/bpe_tokenizer/pretokenizer.hpp): its Unicode tables against
// ICU's properties for every code point, and its split rules against ICU's regex engine on the same regexes,
// piece for piece, over hard cases and random strings. Without ICU on this machine only the checks that
// need no reference run (the rules' pieces on a few worked examples).
#define BOOST_TEST_MODULE pretokenizer
#include <array>
#include <map>
#include <random>

#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include "glassbox/error.hpp"
#include "pretokenizer.hpp"
#include "support.hpp"

#if GLASSBOX_BPE_HAVE_ICU
#include <unicode/uchar.h>
#include <unicode/uniset.h>
#include <unicode/unistr.h>
#endif

namespace bdata = boost::unit_test::data;
namespace bpe = glassbox::bpe;
using nlohmann::json;

namespace {

// The regex lists the tokenizer uses: each known regex alone, and the families' lists (llama.cpp's).
struct List {
  std::string name;
  std::vector<std::string> regexes;
};
std::ostream& operator<<(std::ostream& os, const List& l) { return os << l.name; }

std::vector<List> lists() {
  return {{"gpt2", {bpe::kGpt2}},
          {"llama3", {bpe::kLlama3}},
          {"qwen2", {bpe::kQwen2}},
          {"each-number", {bpe::kEachNumber}},
          {"number-runs", {bpe::kNumberRuns}},
          {"default-punct", {bpe::kDefaultPunct}},
          {"digit-triples", {bpe::kDigitTriples}},
          {"smollm", {bpe::kEachNumber, bpe::kGpt2}},
          {"default", {bpe::kDefaultPunct, bpe::kGpt2, bpe::kNumberRuns, bpe::kDigitTriples}}};
}

std::string utf8(char32_t cp) {  // any value below 2^21, surrogates included (as invalid UTF-8)
  std::string out;
  if (cp < 0x80) out += static_cast<char>(cp);
  else if (cp < 0x800) out += static_cast<char>(0xC0 | (cp >> 6)), out += static_cast<char>(0x80 | (cp & 0x3F));
  else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return out;
}

std::string show(const std::string& s) { return json(s).dump(-1, ' ', true, json::error_handler_t::replace); }

using Pieces = std::vector<std::string>;
Pieces pieces(const bpe::PreTokenizer& p, const std::string& text) {
  std::vector<std::pair<std::size_t, std::size_t>> r;
  p.split(text, r);
  Pieces out;
  for (auto [a, b] : r) out.push_back(text.substr(a, b - a));
  return out;
}
std::string show(const Pieces& ps) {
  std::string out = "[";
  for (const auto& p : ps) out += (out.size() > 1 ? ", " : "") + show(p);
  return out + "]";
}

// The hard cases: contractions with letters that case-fold to ASCII (ſ, K, İ), digit runs, CJK,
// combining marks, emoji, line breaks, spaces before words, the odd White_Space characters, invalid UTF-8.
std::vector<std::string> hard_cases() {
  std::vector<std::string> out = {
      "",
      "Hello world's  end  ",
      "it's IT'S It'S 'S 's 'Re 're 'rE 'VE 'll 'LL 'lL 'd 'D 'm 'M 't 'T",
      "'\xC5\xBF 'a\xC5\xBF 'x \xC5\xBF's 'K 'k '\xE2\x84\xAA 'I 'i '\xC4\xB0 '\xC4\xB0s \xC4\xB0't",  // 'ſ 'K(Kelvin) 'İ
      "'\xC5\xBF" "a '\xEF\xAC\x85 '\xEF\xAC\x86 '\xC3\x9F '\xC7\x89",                                // 'ſa 'ﬅ 'ﬆ 'ß 'ǉ
      "''s ''' 's's 'sss '", "'", "'s", "a'", " '", "x'll've're",
      "1 12 123 1234 12345 123456 1234567 a1 1a 1.5 1,000,000",
      "\xD9\xA1\xD9\xA2\xD9\xA3\xD9\xA4 \xE2\x85\xAB\xE2\x85\xA0 \xC2\xB2\xC2\xB3 \xE2\x91\xA0\xE2\x91\xA1",  // ١٢٣٤ Ⅻ Ⅰ ²³ ①②
      "\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C\xE3\x80\x82 \xE3\x81\x93\xE3\x82\x93\xE3\x81\xAB\xE3\x81\xA1\xE3\x81\xAF",
      "e\xCC\x81" "cole cafe\xCC\x81 \xCC\x81" "a a\xCC\x81\xCC\x82" "b \xE0\xA4\xB9\xE0\xA4\xBF\xE0\xA4\x82\xE0\xA4\xA6\xE0\xA5\x80",
      "\xF0\x9F\x98\x80 \xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD \xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9 a\xF0\x9F\x98\x80" "b",
      "a\r\nb\n\nc\r\r\n \n d \r\n  e\n", "\r\n", "\n\n\n", " \n", "\n ", " \r\n x", "x \n\n  ", "!!!\r\n\r\nx", "?\n",
      "word  word   word\tword \t word", "trailing   ", "  leading", " ", "  ", "   x", "\t\tx", "x\t", " \tx",
      "a\xC2\x85" "b \xC2\x85 x\xC2\x85\xC2\x85", "a\vb \v x\v\v", "a\fb", "a\xC2\xA0" "b \xC2\xA0x \xC2\xA0 x",
      "\xE2\x80\xA8x\xE2\x80\xA9 \xE3\x80\x80" "a\xE3\x80\x80\xE3\x80\x80" "b \xE2\x80\x83\xE2\x80\x83x\xE1\x9A\x80",
      "\xFF", "a\xFF" "b", "\xFF\xFE", " \xFF x", "\xC3", "\xC3(", "\xE2\x82", "\xF0\x9F\x98", "\xC0\x80", "\xF5\x80\x80\x80", "\x80\x80x",
      "\xED\xA0\x80", "a\xED\xA0\x80" "b \xED\xB0\x80 \xED\xA0\xBD\xED\xB8\x80", "\xEF\xBF\xBD x",
      "$5+3=8 <a> ^~| a|b ${x} 1+1", "...!!! ?? -- __init__ (a) [b] {c} \"q\" \xC2\xAB\xC2\xBB \xE2\x80\x94 \xE3\x80\x8C\xE3\x80\x8D",
      "hello!!world ,x , x x,", " !x ! x", "a.b.c", "#include <x.h>\n\nint main() { return 0; }\n",
      "\x01\x02 \x7F x\x1B[0m", "\xCD\xB8 \xF0\x90\x80\x80 \xF3\xA0\x80\x81 \xEE\x80\x80 \xF4\x8F\xBF\xBF",  // unassigned, Linear B, tag, private use
  };
  return out;
}

#if GLASSBOX_BPE_HAVE_ICU

// Code points of every general category, for random strings.
const std::vector<std::vector<char32_t>>& by_category() {
  static const auto table = [] {
    std::vector<std::vector<char32_t>> t(U_CHAR_CATEGORY_COUNT);
    for (UChar32 c = 0; c <= 0x10FFFF; ++c) t[u_charType(c)].push_back(static_cast<char32_t>(c));
    std::erase_if(t, [](const auto& v) { return v.empty(); });
    return t;
  }();
  return table;
}

// Random strings of ASCII, contractions, whitespace (every White_Space character, and line breaks in
// runs), punctuation, digits, code points of every general category (surrogates encoded as invalid
// UTF-8), and invalid bytes: seeded, the same on every machine.
std::vector<std::string> random_strings(int count, unsigned seed) {
  std::mt19937 rng(seed);
  auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  const std::vector<std::string> ws = {" ", " ", " ", "  ", "\t", "\n", "\n", "\r", "\r\n", "\v", "\f", "\xC2\x85", "\xC2\xA0",
                                       "\xE1\x9A\x80", "\xE2\x80\x80", "\xE2\x80\x8A", "\xE2\x80\xA8", "\xE2\x80\xA9", "\xE2\x80\xAF",
                                       "\xE2\x81\x9F", "\xE3\x80\x80", "\xE2\x80\x8B" /* ZWSP: not White_Space */};
  const std::vector<std::string> apos = {"'s", "'S", "'t", "'re", "'RE", "'rE", "'ve", "'m", "'M", "'ll", "'Ll", "'d", "'",
                                         "''", "'\xC5\xBF", "'\xE2\x84\xAA", "'\xC4\xB0", "'x", "'1", "' "};
  const std::string punct = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";
  const auto& cats = by_category();
  std::vector<std::string> out;
  for (int i = 0; i < count; ++i) {
    std::string s;
    for (std::size_t parts = pick(16); parts > 0; --parts) {
      switch (pick(10)) {
        case 0: case 1: s += static_cast<char>('a' + pick(26)); if (pick(2)) s += static_cast<char>('A' + pick(26)); break;
        case 2: s += ws[pick(ws.size())]; break;
        case 3: s += apos[pick(apos.size())]; break;
        case 4: s += punct[pick(punct.size())]; break;
        case 5: for (std::size_t k = 1 + pick(7); k > 0; --k) s += static_cast<char>('0' + pick(10)); break;
        case 6: case 7: {
          const auto& cat = cats[pick(cats.size())];
          s += utf8(cat[pick(cat.size())]);
          break;
        }
        case 8: s += static_cast<char>(0x80 + pick(128)); break;  // an invalid byte
        default: s += static_cast<char>(1 + pick(127)); break;   // any ASCII, controls included
      }
    }
    out.push_back(s);
  }
  return out;
}

// The reference: ICU's regex engine on the same regexes, the way the tokenizer has always run them.
void check_against_icu(const List& l, const std::vector<std::string>& texts) {
  const bpe::PreTokenizer rules(l.regexes, "rules"), icu(l.regexes, "icu", bpe::PreTokenizer::Engine::Icu);
  int bad = 0;
  for (const auto& t : texts) {
    const Pieces a = pieces(rules, t), b = pieces(icu, t);
    if (a != b && ++bad <= 5) BOOST_ERROR(l.name << " on " << show(t) << ": rules " << show(a) << ", ICU " << show(b));
  }
  BOOST_TEST(bad == 0, l.name << ": " << bad << " of " << texts.size() << " strings split differently");
}

struct IcuTablesVersion {
  boost::test_tools::assertion_result operator()(boost::unit_test::test_unit_id) const {
    boost::test_tools::assertion_result r(std::string(U_UNICODE_VERSION) == bpe::unicode_tables_unicode_version());
    if (!r) r.message() << "this ICU has Unicode " << U_UNICODE_VERSION << ", the tables " << bpe::unicode_tables_unicode_version()
                        << ": regenerate them with tools/gen-unicode-tables.sh";
    return r;
  }
};

#endif

}  // namespace

// Worked examples, by hand from the regexes (no ICU needed).
BOOST_AUTO_TEST_CASE(rules_split_worked_examples) {
  auto split = [](const std::vector<std::string>& res, const std::string& text) { return pieces(bpe::PreTokenizer(res, "t"), text); };
  BOOST_TEST(split({bpe::kGpt2}, "Hello world's  end  ") == (Pieces{"Hello", " world", "'s", " ", " end", "  "}), boost::test_tools::per_element());
  BOOST_TEST(split({bpe::kGpt2}, "it'S 12345 ok!?") == (Pieces{"it", "'", "S", " 12345", " ok", "!?"}), boost::test_tools::per_element());
  BOOST_TEST(split({bpe::kLlama3}, "it'S 1234567") == (Pieces{"it", "'S", " ", "123", "456", "7"}), boost::test_tools::per_element());
  BOOST_TEST(split({bpe::kLlama3}, "\r\n\r\n  x!!\n\ny") == (Pieces{"\r\n\r\n", " ", " x", "!!\n\n", "y"}), boost::test_tools::per_element());
  BOOST_TEST(split({bpe::kQwen2}, "a 123") == (Pieces{"a", " ", "1", "2", "3"}), boost::test_tools::per_element());
  BOOST_TEST(split({bpe::kEachNumber, bpe::kGpt2}, "x 12") == (Pieces{"x", " ", "1", "2"}), boost::test_tools::per_element());
  BOOST_TEST(split({bpe::kDefaultPunct, bpe::kGpt2, bpe::kNumberRuns, bpe::kDigitTriples}, "a+=b 1234567") ==
                 (Pieces{"a", "+=", "b", " ", "123", "456", "7"}),
             boost::test_tools::per_element());
  // An invalid byte is one piece-unit of its own (U+FFFD for the rules), kept as the original byte.
  BOOST_TEST(split({bpe::kGpt2}, "a\xFF\xFE b") == (Pieces{"a", "\xFF\xFE", " b"}), boost::test_tools::per_element());
  BOOST_TEST(split({bpe::kGpt2}, "").empty());
}

BOOST_AUTO_TEST_CASE(both_spellings_of_llama3_and_qwen2_get_the_spelled_out_rule) {
  BOOST_TEST((bpe::rule_for(bpe::kLlama3Original) == bpe::Rule::Llama3));
  BOOST_TEST((bpe::rule_for(bpe::kQwen2Original) == bpe::Rule::Qwen2));
  BOOST_TEST((bpe::rule_for(bpe::kGpt2) == bpe::Rule::Gpt2));
  BOOST_TEST(!bpe::rule_for(R"(\w+|\s+)"));
  BOOST_TEST(!bpe::rule_for(std::string(bpe::kGpt2) + " "));
}

#if GLASSBOX_BPE_HAVE_ICU

// The tables' properties are ICU's regex classes (\p{L}, \p{N}, \p{P}, \p{White_Space}) for every code point.
BOOST_AUTO_TEST_CASE(tables_equal_icu_for_every_code_point, *boost::unit_test::precondition(IcuTablesVersion())) {
  BOOST_TEST_MESSAGE("tables from ICU " << bpe::unicode_tables_icu_version() << " (Unicode " << bpe::unicode_tables_unicode_version()
                                        << "); this ICU " << U_ICU_VERSION);
  UErrorCode st = U_ZERO_ERROR;
  const std::array<std::pair<icu::UnicodeSet, unsigned char>, 4> sets = {{
      {icu::UnicodeSet(u"[\\p{L}]", st), bpe::kLetter},
      {icu::UnicodeSet(u"[\\p{N}]", st), bpe::kNumber},
      {icu::UnicodeSet(u"[\\p{P}]", st), bpe::kPunct},
      {icu::UnicodeSet(u"[\\p{White_Space}]", st), bpe::kSpace},
  }};
  BOOST_TEST_REQUIRE(U_SUCCESS(st));
  int bad = 0;
  for (UChar32 c = 0; c <= 0x10FFFF; ++c) {
    unsigned char want = 0;
    for (const auto& [set, bit] : sets) want |= set.contains(c) ? bit : 0;
    const unsigned char got = bpe::unicode_props(static_cast<char32_t>(c));
    if (got != want && ++bad <= 10) BOOST_ERROR("U+" << std::hex << c << ": tables " << int(got) << ", ICU " << int(want));
  }
  BOOST_TEST(bad == 0, bad << " code points differ");
  BOOST_TEST(bpe::unicode_props(0x110000) == 0);
}

// These two draw on code points whose properties may change in another Unicode version: they need the
// tables' version, as the tables' test does.
BOOST_TEST_DECORATOR(*boost::unit_test::precondition(IcuTablesVersion()))
BOOST_DATA_TEST_CASE(rules_equal_icu_on_hard_cases, bdata::make(lists()), l) { check_against_icu(l, hard_cases()); }

BOOST_TEST_DECORATOR(*boost::unit_test::precondition(IcuTablesVersion()))
BOOST_DATA_TEST_CASE(rules_equal_icu_on_random_strings, bdata::make(lists()), l) {
  static const auto texts = random_strings(20000, 43);  // the same strings for every list
  check_against_icu(l, texts);
  // Each rule's hard parts come up in the draw (else the comparison would prove little).
  std::map<std::string, int> seen;
  for (const auto& t : texts) {
    for (const char* s : {"'s", "'S", "'\xC5\xBF", "\r\n", "  ", "\xC2\x85", "\xED\xA0"}) seen[s] += t.find(s) != std::string::npos;
    std::size_t digits = 0, longest = 0;
    for (char c : t) longest = std::max(longest, digits = c >= '0' && c <= '9' ? digits + 1 : 0);
    seen["7 digits"] += longest >= 7;
  }
  for (const auto& [s, n] : seen) BOOST_TEST(n >= 20, show(s) << " in only " << n << " strings");
}

// Every string of up to 4 symbols over an alphabet of what the rules tell apart: spaces of each kind the
// regexes single out, letters (of contractions and not), a digit, punctuation, an apostrophe, an invalid byte.
BOOST_DATA_TEST_CASE(rules_equal_icu_on_every_short_string, bdata::make(lists()), l) {
  static const auto texts = [] {
    const std::vector<std::string> alphabet = {" ", "\n", "\r", "\t", "\xC2\xA0", "a", "s", "l", "L", "'", "1", "!", "\xFF"};
    std::vector<std::string> out = {""};
    for (std::size_t from = 0, len = 1; len <= 4; ++len) {
      const std::size_t to = out.size();
      for (std::size_t i = from; i < to; ++i)
        for (const auto& a : alphabet) out.push_back(out[i] + a);
      from = to;
    }
    return out;
  }();
  BOOST_TEST(texts.size() == 1u + 13 + 169 + 2197 + 28561);
  check_against_icu(l, texts);
}

// Why the tokenizer reads Llama 3's (?i:...) spelling as the spelled-out one: ICU's case-insensitive
// match folds ſ to s, so the two spellings split differently, and llama.cpp follows the spelled-out one.
BOOST_AUTO_TEST_CASE(icu_case_folding_is_why_the_original_spelling_is_not_used) {
  const bpe::PreTokenizer original({bpe::kLlama3Original}, "o", bpe::PreTokenizer::Engine::Icu);
  const bpe::PreTokenizer spelled({bpe::kLlama3}, "s", bpe::PreTokenizer::Engine::Icu);
  const bpe::PreTokenizer rules({bpe::kLlama3Original}, "r");
  const std::string text = "'\xC5\xBF" "a";  // 'ſa
  BOOST_TEST(pieces(original, text) == (Pieces{"'\xC5\xBF", "a"}), boost::test_tools::per_element());
  BOOST_TEST(pieces(spelled, text) == (Pieces{text}), boost::test_tools::per_element());
  BOOST_TEST(pieces(rules, text) == (Pieces{text}), boost::test_tools::per_element());
}

// Vocabulary pieces decode as ICU's UnicodeString::fromUTF8 decodes them (one U+FFFD per maximal ill-formed subpart).
BOOST_AUTO_TEST_CASE(vocabulary_decoding_equals_icu) {
  std::mt19937 rng(7);
  const std::vector<std::string> fixed = {"", "abc", "\xC3\xA9", "\xE2\x82", "\xE2\x82x", "\xF0\x9F\x98", "\xED\xA0\x80", "\xC0\xAF",
                                          "\xE0\x80\xAF", "\xF4\x90\x80\x80", "\xF8\x88\x80\x80\x80", "\x80\xBF", "\xF0\x90\x80"};
  std::vector<std::string> texts = fixed;
  for (int i = 0; i < 20000; ++i) {
    std::string s;
    for (int k = static_cast<int>(rng() % 8); k > 0; --k) s += static_cast<char>(rng() % 3 ? 0x80 + rng() % 128 : rng() % 256);
    texts.push_back(s);
  }
  int bad = 0;
  for (const auto& t : texts) {
    const icu::UnicodeString u = icu::UnicodeString::fromUTF8(t);
    std::u32string want;
    for (int32_t k = 0; k < u.length(); k = u.moveIndex32(k, 1)) want += static_cast<char32_t>(u.char32At(k));
    if (bpe::utf8_to_u32(t) != want && ++bad <= 5) BOOST_ERROR("differs from ICU on " << show(t));
  }
  BOOST_TEST(bad == 0);
}

#endif

// A regex the rules do not know runs through ICU where the build has it, and is refused in one line naming
// it where it has not.
BOOST_AUTO_TEST_CASE(unknown_regexes_need_icu) {
  const std::string re = R"(\w+|[^\w\s]+)";
  if (bpe::PreTokenizer::has_icu()) {
    BOOST_TEST(pieces(bpe::PreTokenizer({re}, "t"), "ab, cd") == (Pieces{"ab", ",", " ", "cd"}), boost::test_tools::per_element());
  } else {
    try {
      bpe::PreTokenizer({re}, "file.json");
      BOOST_FAIL("accepted an unknown regex without ICU");
    } catch (const glassbox::TokenizerError& e) {
      const std::string msg = e.what();
      BOOST_TEST(msg.find("file.json: pre-tokenizer regex '" + re + "'") == 0u, msg);
      BOOST_TEST(msg.find("no regex engine") != std::string::npos, msg);
      BOOST_TEST(msg.find('\n') == std::string::npos, msg);
    }
  }
}
