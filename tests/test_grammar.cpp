// The grammar stage: GBNF parsing (llama.cpp's example grammars, written out here), the recognizer's
// accept/reject answers, the rejection walk against token-by-token acceptance, the JSON-schema
// converter, error messages, and runs of stories260K under `--grammar` / `--json-schema`.
#define BOOST_TEST_MODULE grammar
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <thread>
#include <set>

#include "grammar_engine.hpp"
#include "support.hpp"

#include <glassbox/error.hpp>
#include <glassbox/interrupt_flag.hpp>

extern char** environ;
namespace fs = std::filesystem;
namespace bdata = boost::unit_test::data;
using DocCase = std::pair<std::string, int>;
using TextCase = std::pair<std::string, std::string>;
using ArgsCase = std::pair<std::string, std::vector<std::string>>;
BOOST_TEST_DONT_PRINT_LOG_VALUE(DocCase)
BOOST_TEST_DONT_PRINT_LOG_VALUE(TextCase)
BOOST_TEST_DONT_PRINT_LOG_VALUE(ArgsCase)
namespace gr = glassbox::grammar;
using gbtest::run_cli;
using nlohmann::json;

namespace {

// llama.cpp's grammars/arithmetic.gbnf, list.gbnf and json.gbnf, and a few of our own.
const char* kArithmetic = R"g(root  ::= (expr "=" ws term "\n")+
expr  ::= term ([-+*/] term)*
term  ::= ident | num | "(" ws expr ")" ws
ident ::= [a-z] [a-z0-9_]* ws
num   ::= [0-9]+ ws
ws    ::= [ \t\n]*
)g";
const char* kList = R"(root ::= item+

# Excludes various line break characters
item ::= "- " [^\r\n\x0b\x0c\x85\u2028\u2029]+ "\n"
)";
const char* kJson = R"(root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws

array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws

string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws

number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws

# Optional space: by convention, applied in this grammar after literal chars when allowed
ws ::= | " " | "\n" [ \t]{0,20}
)";
const char* kYesNo = R"(root ::= ("yes" | "no") ".")";
const char* kCounts = "root ::= \"a\"{2,3} \"b\"{2} \"c\"{1,} \"d\"?";
const char* kUnicode = "root ::= [α-ω]+ \"→\" [^a-z]";

struct Case {
  const char* grammar;
  std::string text;
  int expect;  // 2: a complete sentence; 1: a prefix of one, not complete; 0: rejected
};
std::ostream& operator<<(std::ostream& o, const Case& c) { return o << "'" << c.text << "' expect " << c.expect; }

const std::vector<Case> kCases = {
    {kArithmetic, "a=b\n", 2},
    {kArithmetic, "x1 = (y + 2) * 3\n", 0},  // a space after an operator: ws follows terms only
    {kArithmetic, "x1*(y +2)= 3\nz=4\n", 2},
    {kArithmetic, "x1*(y +2)= 3", 1},
    {kArithmetic, "x1= (y + 2)", 0},  // ws comes after a term, not after an operator
    {kArithmetic, "=", 0},
    {kArithmetic, "a=(b\n", 1},
    {kArithmetic, "a=(b))\n", 0},
    {kList, "- milk\n- eggs\n", 2},
    {kList, "- milk", 1},
    {kList, "-milk\n", 0},
    {kList, "- \n", 0},
    {kJson, "{\"a\": [1, 2.5, -3e+4, true, null], \"b\": {\"c\": \"d\\n\"}}", 2},
    {kJson, "{}", 2},
    {kJson, "{\"a\": 01}", 0},
    {kJson, "{\"a\": [1, 2", 1},
    {kJson, "{'a': 1}", 0},
    {kJson, "[1]", 0},  // root is an object
    {kJson, "{\"\\x\": 1}", 0},
    {kJson, "{\"\\u00e9\": \"é\"}", 2},
    {kYesNo, "yes.", 2},
    {kYesNo, "no.", 2},
    {kYesNo, "yes", 1},
    {kYesNo, "n", 1},
    {kYesNo, "maybe.", 0},
    {kYesNo, "yes. ", 0},
    {kYesNo, "Yes.", 0},
    {kCounts, "aabbc", 2},
    {kCounts, "aaabbcccd", 2},
    {kCounts, "abbc", 0},
    {kCounts, "aaaabbc", 0},
    {kCounts, "aabbb", 0},
    {kCounts, "aabb", 1},
    {kCounts, "aabbcdd", 0},
    {kUnicode, "αβγ→Ж", 2},
    {kUnicode, "αβγ→a", 0},
    {kUnicode, "abc", 0},
    {kUnicode, "αβ", 1},
};

int classify(const gr::Grammar& g, const std::string& text, bool bytewise) {
  gr::Recognizer r(g);
  if (bytewise) {
    for (char c : text)
      if (!r.accept_text(std::string(1, c))) return 0;
  } else if (!r.accept_text(text)) {
    return 0;
  }
  return r.complete() ? 2 : 1;
}

std::vector<std::string> cat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<std::string> run_args() { return cat({"run"}, gbtest::stories_args()); }

std::string parse_error(const std::string& text) {
  try {
    gr::parse(text, "g.gbnf");
  } catch (const glassbox::ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

// Whole texts and texts fed one byte at a time (UTF-8 characters split across tokens) give the same answers.
BOOST_DATA_TEST_CASE(recognizer_accepts_and_rejects, bdata::make(kCases), c) {
  const gr::Grammar g = gr::parse(c.grammar, "g.gbnf");
  BOOST_TEST(classify(g, c.text, false) == c.expect);
  BOOST_TEST(classify(g, c.text, true) == c.expect);
}

// The rejection walk (every candidate at once, stack by stack) against accepting each candidate on its
// own, over random vocabularies of short texts and states reached by random prefixes of valid sentences.
BOOST_DATA_TEST_CASE(reject_equals_token_by_token_acceptance, bdata::xrange(40), k) {
  const std::vector<std::pair<const char*, std::vector<std::string>>> grammars = {
      {kJson, {"{\"a\": [1, 2.5, -3e+4, true, null], \"b\": {\"c\": \"d\\n\"}}", "{ \"k\" : \"v\" }"}},
      {kArithmetic, {"x1*(y +2)= 3\nz=4\n"}},
      {kList, {"- milk\n- eggs\n"}},
      {kUnicode, {"αβγ→Ж"}},
  };
  const auto& [text, sentences] = grammars[static_cast<std::size_t>(k) % grammars.size()];
  const gr::Grammar g = gr::parse(text, "g.gbnf");
  std::mt19937 rng(static_cast<unsigned>(k));
  const std::string alphabet = "{}[]\":,. -+eE0123456789abtxyz=()*\n\\";
  std::vector<std::string> vocab = {"", "α", "β", "→", "Ж", "\xce", "\xb1", "\x80"};  // incl. split characters
  for (int i = 0; i < 300; ++i) {
    std::string t;
    for (int n = 1 + static_cast<int>(rng() % 4); n > 0; --n) t += alphabet[rng() % alphabet.size()];
    vocab.push_back(t);
  }
  const std::string& s = sentences[rng() % sentences.size()];
  for (std::size_t cut : {std::size_t{0}, s.size() / 3, s.size() / 2, s.size() - 1, s.size()}) {
    gr::Recognizer r(g);
    BOOST_TEST_REQUIRE(r.accept_text(s.substr(0, cut)));
    std::vector<std::vector<std::uint32_t>> cps;
    std::vector<gr::TokenText> cands;
    for (std::size_t i = 0; i < vocab.size(); ++i) {
      auto [v, p] = gr::decode_utf8(vocab[i], r.partial());
      cps.push_back(std::move(v));
      cands.push_back({i, nullptr, p});
    }
    for (std::size_t i = 0; i < vocab.size(); ++i) cands[i].code_points = cps[i].data();
    std::set<std::size_t> rejected;
    for (const auto& t : r.reject(cands)) rejected.insert(t.index);
    for (std::size_t i = 0; i < vocab.size(); ++i) {
      gr::Recognizer copy = r;
      const bool ok = copy.accept_text(vocab[i]) && !vocab[i].empty();
      // An empty text passes the walk (nothing to check); the stage removes it by itself.
      if (vocab[i].empty()) continue;
      BOOST_TEST(ok == !rejected.count(i), "prefix '" << s.substr(0, cut) << "' token '" << vocab[i] << "'");
    }
  }
}

struct SyntaxCase {
  std::string text, message;
};
std::ostream& operator<<(std::ostream& o, const SyntaxCase& c) { return o << c.message; }

BOOST_DATA_TEST_CASE(syntax_errors_name_line_and_column,
                     bdata::make(std::vector<SyntaxCase>{
                         {"root ::= \"a\"\nitem := \"b\"\n", "g.gbnf:2:6: expected '::=' after the rule name 'item'"},
                         {"root ::= \"abc\n", "g.gbnf:1:10: unterminated string literal"},
                         {"root ::= [a-z\n", "g.gbnf:1:10: unterminated character class"},
                         {"root ::= (\"a\" | \"b\"\n\n", "g.gbnf:3:1: expected ')' to close the group opened at 1:10"},
                         {"root ::= \"a\" @\n", "g.gbnf:1:14: expected an element"},
                         {"root ::= * \"a\"\n", "g.gbnf:1:10: expected an element before '*' to repeat"},
                         {"root ::= \"\\q\"\n", "g.gbnf:1:11: unknown escape '\\q'"},
                         {"root ::= \"a\"{3,1}\n", "g.gbnf:1:13: repetition {3,1} has max < min"},
                         {"root ::= item\nitem ::= \"a\" other\n", "g.gbnf:2:14: undefined rule 'other'"},
                         {"item ::= \"a\"\n", "g.gbnf: no rule 'root'"},
                         {"root ::= \"a\"\nroot ::= \"b\"\n", "g.gbnf:2:1: rule 'root' is defined twice"},
                         {"root ::= expr\nexpr ::= expr \"+\" \"1\" | \"1\"\n", "rule 'expr' is left-recursive"},
                         {"root ::= ws root \"x\" | \"y\"\nws ::= \" \"*\n", "rule 'root' is left-recursive"},
                         {"", "g.gbnf: the grammar is empty"},
                         {"root ::= " + [] {
                            std::string r;
                            for (int i = 0; i < 8; ++i) r += "\"abcd\"{100000} ";
                            return r;
                          }() + "\n",
                          "g.gbnf:1:91: the grammar grows past 4000000 elements"},
                         {"root ::= " + std::string(2000, '(') + "\"a\"" + std::string(2000, ')') + "\n",
                          "g.gbnf:1:1010: groups nested more than 1000 deep"},
                     }),
                     c) {
  const std::string m = parse_error(c.text);
  BOOST_TEST(m.find(c.message) != std::string::npos, "got: " << m);
  BOOST_TEST(m.find('\n') == std::string::npos);
}

// Comments, blank lines, escapes, '.', nested groups and CRLF line ends all parse; to_gbnf shows the rules.
BOOST_AUTO_TEST_CASE(parser_takes_the_example_syntax) {
  const gr::Grammar g = gr::parse("# top\r\nroot ::= (\"\\x41\" | [\\u0042-\\U00000043]) . # any\r\n\r\n", "g.gbnf");
  BOOST_TEST(classify(g, "Az", false) == 2);
  BOOST_TEST(classify(g, "C\xe2\x86\x92", false) == 2);
  BOOST_TEST(classify(g, "D!", false) == 0);
  for (const char* text : {kArithmetic, kList, kJson, kYesNo, kCounts, kUnicode}) {
    const gr::Grammar a = gr::parse(text, "g.gbnf");
    const gr::Grammar b = gr::parse(gr::to_gbnf(a), "again.gbnf");  // the printed form means the same
    for (const auto& c : kCases)
      if (c.grammar == text) BOOST_TEST(classify(b, c.text, false) == c.expect, c.text);
  }
}

// ---- JSON schema ----

const char* kSchema = R"({
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "answer",
  "type": "object",
  "properties": {
    "answer": {"enum": ["yes", "no"]},
    "count": {"type": "integer"},
    "ok": {"type": "boolean"},
    "note": {"type": "string", "maxLength": 3},
    "tags": {"type": "array", "items": {"const": "x"}, "minItems": 1, "maxItems": 2}
  },
  "required": ["answer", "count", "ok"],
  "additionalProperties": false
})";

BOOST_DATA_TEST_CASE(json_schema_grammar_accepts_exactly_the_valid_documents,
                     bdata::make(std::vector<std::pair<std::string, int>>{
                         {R"({"answer": "yes", "count": 3, "ok": true})", 2},
                         {R"({"answer":"no","count":-12,"ok":false,"note":"abc"})", 2},
                         {R"({"answer": "no", "count": 0, "ok": false, "tags": ["x", "x"]})", 2},
                         {R"({"answer": "no", "count": 0, "ok": false, "note": "ab", "tags": ["x"]})", 2},
                         {R"({"answer": "maybe", "count": 3, "ok": true})", 0},
                         {R"({"answer": "yes", "count": 3.5, "ok": true})", 0},
                         {R"({"answer": "yes", "ok": true})", 0},        // count is required
                         {R"({"count": 3, "answer": "yes", "ok": true})", 0},  // required ones come first, in order
                         {R"({"answer": "yes", "count": 3, "ok": true, "extra": 1})", 0},
                         {R"({"answer": "yes", "count": 3, "ok": true, "note": "abcd"})", 0},
                         {R"({"answer": "yes", "count": 3, "ok": true, "tags": []})", 0},
                         {R"({"answer": "yes", "count": 3, "ok": true, "tags": ["x", "x", "x"]})", 0},
                         {R"({"answer": "yes", "count": 3, "ok": true)", 1},
                     }),
                     doc) {
  const gr::Grammar g = gr::parse(gr::json_schema_to_gbnf(kSchema, "s.json"), "s.json");
  BOOST_TEST(classify(g, doc.first, false) == doc.second, doc.first);
  if (doc.second == 2) BOOST_TEST(json::accept(doc.first));
}

BOOST_AUTO_TEST_CASE(json_schema_optional_properties_and_plain_types) {
  const std::string opt = R"({"type": "object", "properties": {"a": {"type": "null"}, "b": {"type": "number"}}})";
  const gr::Grammar g = gr::parse(gr::json_schema_to_gbnf(opt, "o.json"), "o.json");
  for (const char* ok : {"{}", R"({"a": null})", R"({"b": 1.5e3})", R"({"a": null, "b": -0.25})"}) BOOST_TEST(classify(g, ok, false) == 2, ok);
  for (const char* bad : {R"({, "b": 1})", R"({"b": 1, "a": null})", R"({"a": 0})"}) BOOST_TEST(classify(g, bad, false) == 0, bad);
  const gr::Grammar any = gr::parse(gr::json_schema_to_gbnf("{}", "any.json"), "any.json");
  BOOST_TEST(classify(any, R"([{"x": [true, "s", null]}, 2])", false) == 2);
  const gr::Grammar arr = gr::parse(gr::json_schema_to_gbnf(R"({"type":"array","items":{"type":"integer"}})", "a.json"), "a.json");
  BOOST_TEST(classify(arr, "[1, 2, 3]", false) == 2);
  BOOST_TEST(classify(arr, "[]", false) == 2);
  BOOST_TEST(classify(arr, "[1, \"2\"]", false) == 0);
}

BOOST_DATA_TEST_CASE(json_schema_errors_name_the_key_path,
                     bdata::make(std::vector<std::pair<std::string, std::string>>{
                         {R"({"type": "object", "properties": {"age": {"type": "integer", "minimum": 0}}})",
                          "s.json: unsupported JSON-schema keyword 'minimum' (supported: "},
                         {R"({"type": "object", "properties": {"age": {"type": "integer", "minimum": 0}}})", "at /properties/age/minimum"},
                         {R"({"anyOf": [{"type": "string"}]})", "at /anyOf"},
                         {R"({"type": "array", "items": [{"type": "string"}]})", "at /items"},
                         {R"({"type": "object", "properties": {"a/b": {"pattern": "x"}}})", "at /properties/a~1b/pattern"},
                         {R"({"type": "object", "properties": {"a": {}}, "required": ["b"]})", "required property \"b\" is not among 'properties' at /required/0"},
                         {R"({"type": "strin"})", "unknown type 'strin'"},
                         {R"({"type": ["string", "null"]})", "at /type"},
                         {R"({"type": "object", "additionalProperties": {"type": "string"}})", "at /additionalProperties"},
                         {"{\"type\": ", "s.json: not valid JSON"},
                         {[] {
                            std::string deep = "{\"type\": \"string\"}";
                            for (int i = 0; i < 150; ++i) deep = "{\"type\": \"array\", \"items\": " + deep + "}";
                            return deep;
                          }(),
                          "schemas nested more than 100 deep"},
                     }),
                     c) {
  std::string m = "(no error)";
  try {
    gr::json_schema_to_gbnf(c.first, "s.json");
  } catch (const glassbox::ConfigError& e) {
    m = e.what();
  }
  BOOST_TEST(m.find(c.second) != std::string::npos, "got: " << m);
}

// ---- runs of stories260K ----

// ---- hostile grammars and schemas (issue 46): bounded cost, Unicode only, interruptible ----

namespace {
// The error a grammar step throws, or "(no error)".
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const glassbox::ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}
std::string nested_arrays(int depth) {
  std::string s = R"({"type": "integer"})";
  for (int i = 0; i < depth; ++i) s = R"({"type": "array", "items": )" + s + "}";
  return s;
}
}  // namespace

// Each level's item is a rule referred to by name: 60 nested arrays make a grammar of 60-odd rules
// (written in place, each level held the one below twice: 2^60).
BOOST_AUTO_TEST_CASE(nested_schema_arrays_grow_linearly) {
  const std::string g16 = gr::json_schema_to_gbnf(nested_arrays(16), "n.json");
  BOOST_TEST(g16.size() < 8000, g16.size());
  const std::string g60 = gr::json_schema_to_gbnf(nested_arrays(60), "n.json");
  BOOST_TEST(g60.size() < 30000, g60.size());
  const gr::Grammar g = gr::parse(g60, "n.json");
  std::string nested = "5";
  for (int i = 0; i < 60; ++i) nested = "[" + nested + "]";
  BOOST_TEST(classify(g, nested, false) == 2);
  BOOST_TEST(classify(g, "[" + nested + "]", false) == 0);  // 61 levels
  // Optional properties only: linear too (each property once, not once per earlier one).
  std::string props;
  for (int i = 0; i < 300; ++i) props += (i ? ", " : "") + ("\"p" + std::to_string(i) + "\": {\"type\": \"integer\"}");
  const std::string wide = gr::json_schema_to_gbnf("{\"type\": \"object\", \"properties\": {" + props + "}}", "w.json");
  BOOST_TEST(wide.size() < 60000, wide.size());
  const gr::Grammar w = gr::parse(wide, "w.json");
  BOOST_TEST(classify(w, R"({"p3": 1, "p7": 2, "p299": 3})", false) == 2);
  BOOST_TEST(classify(w, R"({"p7": 2, "p3": 1})", false) == 0);  // the schema's order
  BOOST_TEST(classify(w, "{}", false) == 2);
}

// Nested bounded repetitions reach the same parse stacks along exponentially many paths: each is
// expanded once, so the answer comes at once (it spun before, at 100% of a core).
BOOST_AUTO_TEST_CASE(nested_bounded_repetitions_answer) {
  const gr::Grammar g = gr::parse(R"(root ::= (("a"{0,10}){0,10}){0,10})", "g.gbnf");
  gr::Recognizer r(g);
  BOOST_TEST(r.complete());
  for (int i = 0; i < 1000; ++i) BOOST_TEST_REQUIRE(r.accept_text("a"));
  BOOST_TEST(r.complete());
  BOOST_TEST(!r.accept_text("a"));  // 1000 is the most
  const gr::Grammar deep = gr::parse(R"(root ::= (((("ab"{0,8}){0,8}){0,8}){0,8}) "!")", "g.gbnf");
  BOOST_TEST(classify(deep, std::string(200, 'x'), false) == 0);
  BOOST_TEST(classify(deep, "abababab!", false) == 2);
}

// Past a bound, a one-line ConfigError naming the limit.
BOOST_AUTO_TEST_CASE(grammar_bounds_are_one_line_errors_naming_the_limit) {
  std::string big = "root ::=";
  for (int i = 0; i < 4; ++i) big += " \"abcdefghij\"{100000}";
  const std::string e1 = parse_error(big);
  BOOST_TEST(e1.find("4000000 elements") != std::string::npos, e1);
  gr::Limits few;
  few.max_rules = 1000;
  const std::string e2 = error_of([&] { gr::parse("root ::= \"a\"{0,5000}", "g.gbnf", few); });
  BOOST_TEST(e2.find("the limit on rules") != std::string::npos, e2);
  std::string alts = "root ::= \"x0\"";
  for (int i = 1; i < 2000; ++i) alts += " | \"x" + std::to_string(i) + "\"";
  const gr::Grammar g = gr::parse(alts, "g.gbnf");
  gr::Limits stacks;
  stacks.max_stacks = 500;
  const std::string e3 = error_of([&] { gr::Recognizer r(g, stacks); });
  BOOST_TEST(e3.find("the limit on stacks per step") != std::string::npos, e3);
  gr::Limits slow;
  slow.max_step_ms = 0;
  const std::string e4 = error_of([&] { gr::Recognizer r(g, slow); });
  BOOST_TEST(e4.find("the limit on time per step") != std::string::npos, e4);
  for (const auto& e : {e1, e2, e3, e4}) BOOST_TEST(e.find('\n') == std::string::npos, e);
}

// 100,000 alternatives (or a 100,000-value enum): each stack is added once through a hash set. The
// quadratic search it replaced took > 20 s here, past the 5 s limit on time per step.
BOOST_AUTO_TEST_CASE(a_hundred_thousand_alternatives_start) {
  std::string alts = "root ::= \"w0\"";
  for (int i = 1; i < 100000; ++i) alts += " | \"w" + std::to_string(i) + "\"";
  const gr::Grammar g = gr::parse(alts, "g.gbnf");
  gr::Recognizer r(g);
  BOOST_TEST(r.stacks().size() == 100000u);
  BOOST_TEST(r.accept_text("w9"));
  BOOST_TEST(r.accept_text("9999"));
  BOOST_TEST(r.complete());
  std::string values;
  for (int i = 0; i < 100000; ++i) values += (i ? "," : "") + ("\"v" + std::to_string(i) + "\"");
  const gr::Grammar e = gr::parse(gr::json_schema_to_gbnf("{\"enum\": [" + values + "]}", "e.json"), "e.json");
  BOOST_TEST(classify(e, "\"v77777\"", false) == 2);
  BOOST_TEST(classify(e, "\"v100000\"", false) == 0);
}

// The decoder takes only Unicode scalar values: overlong forms, surrogates, values past U+10FFFF and
// the bytes C0, C1, F5..FF are invalid, whole or split across two texts (two tokens).
BOOST_DATA_TEST_CASE(utf8_decoder_refuses_what_is_not_unicode,
                     bdata::make(std::vector<std::string>{"\xFC\x80\x80\x80", "\xF8\x88\x80\x80\x80", "\xC0\xAF", "\xC1\xBF",
                                                          "\xE0\x80\xAF", "\xE0\x9F\xBF", "\xED\xA0\x80", "\xED\xBF\xBF",
                                                          "\xF0\x80\x80\xAF", "\xF0\x8F\xBF\xBF", "\xF4\x90\x80\x80", "\xF5\x80\x80\x80",
                                                          "\xFF"}),
                     bytes) {
  BOOST_TEST(gr::decode_utf8(bytes, {}).second.n_remain == -1);
  for (std::size_t cut = 1; cut < bytes.size(); ++cut) {
    const auto first = gr::decode_utf8(bytes.substr(0, cut), {});
    const bool invalid = first.second.n_remain == -1 || gr::decode_utf8(bytes.substr(cut), first.second).second.n_remain == -1;
    BOOST_TEST(invalid, "split at " << cut);
  }
  // A grammar that takes any character never accepts it.
  const gr::Grammar any = gr::parse("root ::= .*", "g.gbnf");
  BOOST_TEST(classify(any, bytes, false) == 0);
  BOOST_TEST(classify(any, bytes, true) == 0);
}

BOOST_AUTO_TEST_CASE(utf8_decoder_takes_every_kind_of_character) {
  for (const std::string s : {"A", "\xC2\x80", "\xC3\xA9", "\xDF\xBF", "\xE0\xA0\x80", "\xE2\x82\xAC", "\xED\x9F\xBF", "\xEE\x80\x80",
                              "\xF0\x90\x80\x80", "\xF0\x9F\x98\x80", "\xF4\x8F\xBF\xBF"}) {
    const auto [cps, rest] = gr::decode_utf8(s, {});
    BOOST_TEST(rest.n_remain == 0, s);
    BOOST_TEST(cps.size() == 2u, s);
    for (std::size_t cut = 1; cut < s.size(); ++cut) {
      const auto first = gr::decode_utf8(s.substr(0, cut), {});
      BOOST_TEST(first.second.n_remain == static_cast<int>(s.size() - cut));
      const auto second = gr::decode_utf8(s.substr(cut), first.second);
      BOOST_TEST(second.second.n_remain == 0);
      BOOST_TEST(second.first[0] == cps[0]);
    }
  }
}

// \u and \U escapes name Unicode characters only.
BOOST_AUTO_TEST_CASE(escapes_refuse_surrogates_and_values_past_unicode) {
  for (const char* bad : {R"(root ::= "\uD800")", R"(root ::= [\uDC00-\uDFFF])", R"(root ::= "\U00110000")", R"(root ::= "\UFFFFFFFF")"}) {
    const std::string e = parse_error(std::string(bad) + "\n");
    BOOST_TEST(e.find("is not a Unicode character") != std::string::npos, bad << ": " << e);
  }
  BOOST_TEST(parse_error("root ::= \"\\U0010FFFF\" \"\\uD7FF\" \"\\uE000\"\n") == "(no error)");
}

// The process's interrupt flag (raised by the CLI's SIGINT/SIGTERM handler) stops a walk.
BOOST_AUTO_TEST_CASE(the_interrupt_flag_stops_a_walk) {
  const gr::Grammar g = gr::parse("root ::= [a-z]+", "g.gbnf");
  gr::Recognizer r(g);
  std::string alts = "root ::= \"x0\"";
  for (int i = 1; i < 5000; ++i) alts += " | \"x" + std::to_string(i) + "\"";
  const gr::Grammar big = gr::parse(alts, "g.gbnf");
  glassbox::raise_interrupt_flag(15);
  const std::string e = error_of([&] { gr::Recognizer rb(big); });
  glassbox::clear_interrupt_flag();
  BOOST_TEST(e.find("interrupted by SIGTERM") != std::string::npos, e);
  BOOST_TEST(r.accept_text("abc"));
}

BOOST_AUTO_TEST_SUITE(runs, *boost::unit_test::precondition(gbtest::NeedsShared{}))

BOOST_AUTO_TEST_CASE(yes_or_no_for_every_seed) {
  const auto dir = gbtest::temp_dir("grammar-yesno");
  gbtest::write_file(dir / "yn.gbnf", std::string(kYesNo) + "\n");
  std::set<std::string> seen;
  for (int seed = 1; seed <= 24; ++seed) {
    // A hot temperature so that both answers come up; the default chain too, for some seeds.
    const std::vector<std::string> chain = seed % 3 ? std::vector<std::string>{"-s", "temperature:2,dist"} : std::vector<std::string>{};
    auto r = run_cli(cat(cat(run_args(), chain),
                         {"-p", "Is the sky blue?", "-n", "32", "--seed", std::to_string(seed), "--grammar", (dir / "yn.gbnf").string()}));
    BOOST_TEST_REQUIRE(r.rc == 0, r.err);
    std::string out = r.out;
    while (!out.empty() && out.back() == '\n') out.pop_back();
    BOOST_TEST((out == "yes." || out == "no."), "seed " << seed << ": '" << r.out << "'");
    seen.insert(out);
  }
  BOOST_TEST(seen.size() == 2u, "both answers over 24 seeds");
}

// The trace's stage record for "grammar" shows how many candidates and how much raw mass it removed;
// `trace render` shows the same.
BOOST_AUTO_TEST_CASE(trace_records_what_the_grammar_removed) {
  const auto dir = gbtest::temp_dir("grammar-trace");
  gbtest::write_file(dir / "yn.gbnf", std::string(kYesNo) + "\n");
  const auto trace = dir / "t.jsonl";
  auto r = run_cli(cat(run_args(), {"-p", "Hi", "-n", "8", "--seed", "3", "--grammar", (dir / "yn.gbnf").string(),
                                                  "--trace", trace.string()}));
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  int steps = 0;
  for (const auto& line : gbtest::read_jsonl(trace)) {
    if (line.value("type", "") != "step") continue;
    ++steps;
    const json& st = line.at("stages").at(0);
    BOOST_TEST(st.at("name") == "grammar");
    BOOST_TEST(st.at("kept").get<int>() < 512);
    BOOST_TEST(st.at("kept").get<int>() >= 1);
    BOOST_TEST(st.at("mass").get<double>() < 1.0);
    BOOST_TEST(st.at("mass").get<double>() > 0.0);
  }
  BOOST_TEST(steps >= 3);  // "no." is at least three steps, then the end-of-generation token
  auto v = run_cli({"trace", "validate", trace.string()});
  BOOST_TEST(v.rc == 0, v.out << v.err);
  auto render = run_cli({"trace", "render", trace.string(), "-o", (dir / "t.dot").string()});
  BOOST_TEST_REQUIRE(render.rc == 0, render.err);
  BOOST_TEST(gbtest::read_file(dir / "t.dot").find("grammar kept ") != std::string::npos);
  // The terminal view (--show-probs) says it under each step.
  auto shown = run_cli(cat(run_args(), {"-p", "Hi", "-n", "8", "--seed", "3", "--grammar", (dir / "yn.gbnf").string(), "--show-probs"}));
  BOOST_TEST_REQUIRE(shown.rc == 0, shown.err);
  BOOST_TEST(shown.err.find("  grammar: kept ") != std::string::npos, shown.err);
  BOOST_TEST(shown.err.find(" of the model's probability (removed ") != std::string::npos, shown.err);
}

BOOST_AUTO_TEST_CASE(json_schema_run_outputs_valid_json) {
  const auto dir = gbtest::temp_dir("grammar-schema");
  gbtest::write_file(dir / "s.json", kSchema);
  int checked = 0;
  for (int seed = 1; seed <= 8; ++seed) {
    auto r = run_cli(cat(run_args(), {"-p", "Once upon a time", "-n", "400", "--seed", std::to_string(seed), "-s",
                                                   "temperature:0.8,dist", "--json-schema", (dir / "s.json").string()}));
    BOOST_TEST_REQUIRE(r.rc == 0, r.err);
    BOOST_TEST_REQUIRE(json::accept(r.out), "seed " << seed << ": " << r.out);
    // The schema, checked by hand.
    const json j = json::parse(r.out);
    BOOST_TEST_REQUIRE(j.is_object());
    BOOST_TEST((j.at("answer") == "yes" || j.at("answer") == "no"));
    BOOST_TEST(j.at("count").is_number_integer());
    BOOST_TEST(j.at("ok").is_boolean());
    for (const auto& [k, v] : j.items()) BOOST_TEST((k == "answer" || k == "count" || k == "ok" || k == "note" || k == "tags"), k);
    if (j.contains("note")) BOOST_TEST((j["note"].is_string() && j["note"].get<std::string>().size() <= 3));
    if (j.contains("tags")) {
      BOOST_TEST((j["tags"].is_array() && j["tags"].size() >= 1 && j["tags"].size() <= 2));
      for (const auto& t : j["tags"]) BOOST_TEST(t == "x");
    }
    ++checked;
  }
  BOOST_TEST(checked == 8);
}

// A grammar no token can continue ends at once with one clear line and exit 2, never a hang.
BOOST_DATA_TEST_CASE(impossible_grammar_is_a_clear_error,
                     bdata::make(std::vector<std::pair<std::string, std::vector<std::string>>>{
                         // NUL: no token's text starts with it (a text holding it counts as empty)
                         {"root ::= \"\\x00\"\n", {}},
                         // complete, but --ignore-eos bans every token that could end it
                         {"root ::= \"yes\"\n", {"--ignore-eos"}},
                     }),
                     c) {
  const auto dir = gbtest::temp_dir("grammar-impossible");
  gbtest::write_file(dir / "g.gbnf", c.first);
  auto r = run_cli(cat(cat(run_args(), c.second), {"-p", "Hi", "-n", "50", "--seed", "1", "--grammar", (dir / "g.gbnf").string()}));
  BOOST_TEST(r.rc == 2);
  BOOST_TEST(r.err.find("can continue " + (dir / "g.gbnf").string() + ", after '") != std::string::npos, r.err);
  if (c.second.empty()) BOOST_TEST(r.err.find("grammar: no token of the vocabulary can continue") != std::string::npos, r.err);
  else BOOST_TEST(r.err.find("after 'yes' (the grammar is complete, but no end-of-generation token is left") != std::string::npos, r.err);
  BOOST_TEST(std::count(r.err.begin(), r.err.end(), '\n') <= 2, r.err);  // a line break after the text streamed so far, then the error
}

BOOST_AUTO_TEST_CASE(cli_errors_exit_2_with_one_line) {
  const auto dir = gbtest::temp_dir("grammar-cli-errors");
  gbtest::write_file(dir / "bad.gbnf", "root ::= \"a\"\nnext ::= (\"b\"\n");
  gbtest::write_file(dir / "undef.gbnf", "root ::= answer\n");
  gbtest::write_file(dir / "s.json", R"({"type": "object", "properties": {"n": {"type": "integer", "maximum": 3}}})");
  gbtest::write_file(dir / "ok.gbnf", "root ::= \"a\"\n");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--grammar", (dir / "bad.gbnf").string()}, (dir / "bad.gbnf").string() + ":3:1: expected ')' to close the group opened at 2:10"},
      {{"--grammar", (dir / "undef.gbnf").string()}, (dir / "undef.gbnf").string() + ":1:10: undefined rule 'answer'"},
      {{"--json-schema", (dir / "s.json").string()}, "unsupported JSON-schema keyword 'maximum'"},
      {{"--json-schema", (dir / "s.json").string()}, "at /properties/n/maximum"},
      {{"--grammar", (dir / "missing.gbnf").string()}, "missing.gbnf"},
      {{"--grammar", (dir / "ok.gbnf").string(), "--json-schema", (dir / "s.json").string()}, "--grammar and --json-schema both given"},
  };
  for (const auto& [args, message] : cases) {
    auto r = run_cli(cat(cat(run_args(), {"-p", "Hi", "-n", "4"}), args));
    BOOST_TEST(r.rc == 2, message);
    BOOST_TEST(r.err.find(message) != std::string::npos, r.err);
    BOOST_TEST(std::count(r.err.begin(), r.err.end(), '\n') <= 1, r.err);
  }
}

// `glassbox ARGS` started, signalled with `sig` once a file whose name holds `stem` in `dir` has content (the run is
// under way) and 700 ms more (inside a step's walk) — or, with an empty `stem`, `early_ms` after its start;
// returns its exit status, or -N when signal N ended it, and the seconds from the signal to its end (-1: still
// running after 10 s, then killed).
std::pair<int, double> signal_during(const std::vector<std::string>& cli_args, const fs::path& dir, const std::string& stem, int sig,
                                     int early_ms = 0) {
  std::vector<std::string> args = cat({GLASSBOX_BIN}, cli_args);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, (dir / "err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid;
  BOOST_TEST_REQUIRE(posix_spawn(&pid, GLASSBOX_BIN, &fa, nullptr, argv.data(), environ) == 0);
  posix_spawn_file_actions_destroy(&fa);
  auto writing = [&] {
    std::error_code ec;
    for (const auto& e : fs::recursive_directory_iterator(dir, ec))
      if (e.path().filename().string().find(stem) != std::string::npos && e.is_regular_file() && e.file_size() > 0) return true;
    return false;
  };
  if (stem.empty()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int>(early_ms * gbtest::kTimeScale)));  // past the start
  } else {
    // Building the chain walks the grammar's first step: slow under the sanitizers, hence the scaled wait.
    for (int i = 0; i < 3000 * gbtest::kTimeScale && !writing(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    BOOST_TEST(writing(), "nothing named " << stem << " was written before the signal");
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
  }
  ::kill(pid, sig);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 1000 * gbtest::kTimeScale; ++i) {
    int st;
    if (::waitpid(pid, &st, WNOHANG) == pid)
      return {WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st), std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()};
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  return {-SIGKILL, -1};
}

// A grammar whose every step is a walk over 240,000 alternatives (a word, then a space and another; a tenth as
// many under the sanitizers: support.hpp).
void write_long_grammar(const fs::path& file) {
  std::string alts = "root ::= w (\" \" w)*\nw ::= \"w0\"";
  for (int i = 1; i < gbtest::kLongGrammarAlternatives; ++i) alts += " | \"w" + std::to_string(i) + "\"";
  gbtest::write_file(file, alts + "\n");
}

// SIGTERM during a run whose every step is a long grammar walk: the walk stops at once (it checks the
// interrupt flag), and the run ends as any interrupted run does: exit 128+15, the trace closed by an
// `interrupted` line. (Before, the walk ignored the signal: minutes per step.)
BOOST_AUTO_TEST_CASE(sigterm_interrupts_a_grammar_walk_in_run) {
  const auto dir = gbtest::temp_dir("grammar-sigterm");
  write_long_grammar(dir / "big.gbnf");
  const auto [rc, waited] = signal_during(cat(run_args(), {"-p", "Hi", "-n", "40", "--ignore-eos", "--grammar", (dir / "big.gbnf").string(),
                                                           "--trace", (dir / "t.jsonl").string()}),
                                          dir, "t.jsonl", SIGTERM);
  BOOST_TEST(rc == 128 + SIGTERM, gbtest::read_file(dir / "err"));
  BOOST_TEST((waited >= 0 && waited < 5.0 * gbtest::kTimeScale), waited);
  const auto lines = gbtest::read_jsonl(dir / "t.jsonl");
  BOOST_TEST_REQUIRE(!lines.empty());
  BOOST_TEST(lines.back()["type"] == "interrupted");
  fs::remove_all(dir);
}

// The signal earlier, while the chain is built (which walks the grammar's first step): still an interrupt,
// exit 128+15 and "interrupted by SIGTERM", not exit 2 with the walk's message as if the input were bad.
BOOST_AUTO_TEST_CASE(sigterm_while_the_grammar_chain_is_built_is_an_interrupt) {
  const auto dir = gbtest::temp_dir("grammar-sigterm-early");
  write_long_grammar(dir / "big.gbnf");
  for (const int early_ms : {150, 300, 450}) {
    BOOST_TEST_CONTEXT("SIGTERM " << early_ms << " ms after the start") {
      const auto [rc, waited] = signal_during(cat(run_args(), {"-p", "Hi", "-n", "40", "--grammar", (dir / "big.gbnf").string()}), dir, "",
                                              SIGTERM, early_ms);
      const std::string err = gbtest::read_file(dir / "err");
      BOOST_TEST(rc == 128 + SIGTERM, err);
      BOOST_TEST((waited >= 0 && waited < 5.0 * gbtest::kTimeScale), waited);
      BOOST_TEST(err.find("interrupted by SIGTERM") != std::string::npos, err);
    }
  }
  fs::remove_all(dir);
}

// SIGTERM while chat's turn is inside such walks: chat ends as `run` does (exit 128+15, "[glassbox]
// interrupted by SIGTERM", the turn's trace closed by an interrupted line). Before, the signal's default
// action killed it: no exit status of its own, and the turn's trace was lost.
BOOST_AUTO_TEST_CASE(sigterm_interrupts_a_grammar_walk_in_chat) {
  const auto dir = gbtest::temp_dir("grammar-chat-sigterm");
  write_long_grammar(dir / "long.gbnf");
  gbtest::write_file(dir / "turns.txt", "hello\n");
  const auto [rc, waited] = signal_during(cat(cat({"chat"}, gbtest::stories_args()), {"--input", (dir / "turns.txt").string(), "-n", "60", "--ignore-eos",
                                                                                     "--grammar", (dir / "long.gbnf").string(), "--trace",
                                                                                     (dir / "t.jsonl").string()}),
                                          dir, "t-turn1", SIGTERM);
  const std::string err = gbtest::read_file(dir / "err");
  BOOST_TEST(rc == 128 + SIGTERM, err);
  BOOST_TEST((waited >= 0 && waited < 5.0 * gbtest::kTimeScale), waited);
  BOOST_TEST(err.find("[glassbox] interrupted by SIGTERM") != std::string::npos, err);
  BOOST_TEST_REQUIRE(fs::exists(dir / "t-turn1.jsonl"));
  const auto lines = gbtest::read_jsonl(dir / "t-turn1.jsonl");
  BOOST_TEST_REQUIRE(!lines.empty());
  BOOST_TEST(lines.back()["type"] == "interrupted");
  BOOST_TEST(lines.back()["signal"] == "SIGTERM");
  fs::remove_all(dir);
}

// SIGINT while a compare sweep's run is inside such walks: exit 128+2 with "compare interrupted by SIGINT:
// no report" (before: the default action of the signal, no status or message of its own).
BOOST_AUTO_TEST_CASE(sigint_interrupts_a_grammar_walk_in_compare) {
  const auto dir = gbtest::temp_dir("grammar-compare-sigint");
  write_long_grammar(dir / "long.gbnf");
  const auto [rc, waited] = signal_during(cat(cat({"compare"}, gbtest::stories_args()),
                                              {"-s", "long=grammar:file=" + (dir / "long.gbnf").string() + ",greedy", "--prompt", "Hi", "--samples",
                                               "1", "-n", "60", "--ignore-eos", "--traces", (dir / "traces").string(), "--json", "-o",
                                               (dir / "report.json").string()}),
                                          dir, "p0-s0-n0", SIGINT);
  const std::string err = gbtest::read_file(dir / "err");
  BOOST_TEST(rc == 128 + SIGINT, err);
  BOOST_TEST((waited >= 0 && waited < 5.0 * gbtest::kTimeScale), waited);
  BOOST_TEST(err.find("[glassbox] compare interrupted by SIGINT: no report") != std::string::npos, err);
  BOOST_TEST(!fs::exists(dir / "report.json"));
  fs::remove_all(dir);
}

// A YAML chain file sets the grammar text inline; a compare strategy names the grammar file.
BOOST_AUTO_TEST_CASE(yaml_chain_and_compare_strategy) {
  const auto dir = gbtest::temp_dir("grammar-yaml");
  gbtest::write_file(dir / "run.yaml",
                     "sampler:\n  - {name: grammar, gbnf: 'root ::= (\"yes\" | \"no\") \".\"'}\n  - temperature:2\n  - dist\n");
  auto r = run_cli(cat(run_args(), {"--config", (dir / "run.yaml").string(), "-p", "Hi", "-n", "16", "--seed", "5"}));
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  BOOST_TEST((r.out == "yes.\n" || r.out == "no.\n" || r.out == "yes." || r.out == "no."), r.out);

  gbtest::write_file(dir / "yn.gbnf", std::string(kYesNo) + "\n");
  auto c = run_cli(cat(cat({"compare"}, gbtest::stories_args()), {"-s", "plain=temperature:2,dist", "-s",
                                                "yesno=grammar:file=" + (dir / "yn.gbnf").string() + ",temperature:2,dist", "--prompt",
                                                "Hi", "--samples", "4", "-n", "16", "--json"}));
  BOOST_TEST_REQUIRE(c.rc == 0, c.err);
  BOOST_TEST(json::accept(c.out));
}

BOOST_AUTO_TEST_SUITE_END()
