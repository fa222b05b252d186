// `glassbox trace render` (Graphviz token tree) and `glassbox plugins --graph` (the pipeline).
#define BOOST_TEST_MODULE trace_render
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <regex>

#include "glassbox/traces/diff.hpp"
#include "glassbox/traces/reader.hpp"
#include "glassbox/traces/token_text.hpp"
#include "support.hpp"
#include "trace_fixtures.hpp"

namespace bdata = boost::unit_test::data;
namespace fs = std::filesystem;
using nlohmann::json;
using namespace gbtest;

namespace {

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

// A small XML well-formedness check: the prolog, comments and doctype are skipped; every start tag is
// closed in order; attribute values are quoted; text holds no raw '<' and only known entities.
// Returns an empty string when well-formed, else what is wrong and where.
std::string xml_problem(const std::string& s) {
  std::vector<std::string> open;
  std::size_t i = 0;
  auto entity_ok = [&](std::size_t at) {
    static const std::regex ent(R"(^&(amp|lt|gt|quot|apos|#[0-9]+|#x[0-9a-fA-F]+);)");
    return std::regex_search(s.begin() + static_cast<long>(at), s.begin() + static_cast<long>(std::min(s.size(), at + 12)), ent);
  };
  bool root_seen = false;
  while (i < s.size()) {
    if (s[i] != '<') {
      if (s[i] == '&' && !entity_ok(i)) return "bad entity at byte " + std::to_string(i);
      if (open.empty() && root_seen && !std::isspace(static_cast<unsigned char>(s[i])))
        return "text after the root element at byte " + std::to_string(i);
      ++i;
      continue;
    }
    if (s.compare(i, 4, "<!--") == 0) {
      const auto e = s.find("-->", i + 4);
      if (e == std::string::npos) return "unclosed comment";
      i = e + 3;
      continue;
    }
    if (s.compare(i, 2, "<?") == 0 || s.compare(i, 2, "<!") == 0) {
      const auto e = s.find('>', i);
      if (e == std::string::npos) return "unclosed declaration";
      i = e + 1;
      continue;
    }
    const bool closing = s.compare(i, 2, "</") == 0;
    std::size_t j = i + (closing ? 2 : 1);
    const std::size_t name_start = j;
    while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == ':' || s[j] == '-' || s[j] == '_')) ++j;
    const std::string name = s.substr(name_start, j - name_start);
    if (name.empty()) return "raw '<' at byte " + std::to_string(i);
    // attributes
    while (j < s.size() && s[j] != '>' && !(s[j] == '/' && j + 1 < s.size() && s[j + 1] == '>')) {
      if (std::isspace(static_cast<unsigned char>(s[j]))) { ++j; continue; }
      if (closing) return "attributes in closing tag </" + name + ">";
      while (j < s.size() && s[j] != '=' && !std::isspace(static_cast<unsigned char>(s[j])) && s[j] != '>') ++j;
      if (j >= s.size() || s[j] != '=') return "attribute without value in <" + name + ">";
      ++j;
      if (j >= s.size() || (s[j] != '"' && s[j] != '\'')) return "unquoted attribute in <" + name + ">";
      const char q = s[j];
      const auto e = s.find(q, j + 1);
      if (e == std::string::npos) return "unterminated attribute in <" + name + ">";
      for (std::size_t k = j + 1; k < e; ++k) {
        if (s[k] == '<') return "'<' in an attribute of <" + name + ">";
        if (s[k] == '&' && !entity_ok(k)) return "bad entity in an attribute of <" + name + ">";
      }
      j = e + 1;
    }
    if (j >= s.size()) return "unterminated tag <" + name;
    const bool self_closing = s[j] == '/';
    i = j + (self_closing ? 2 : 1);
    if (closing) {
      if (open.empty() || open.back() != name)
        return "</" + name + "> closes <" + (open.empty() ? std::string("nothing") : open.back()) + ">";
      open.pop_back();
    } else if (!self_closing) {
      if (open.empty() && root_seen) return "second root element <" + name + ">";
      open.push_back(name);
      root_seen = true;
    } else {
      root_seen = true;
    }
  }
  if (!open.empty()) return "<" + open.back() + "> never closed";
  if (!root_seen) return "no element";
  return "";
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

// Alternatives drawn for a step: its top-K candidates other than the chosen token, at most k.
std::size_t alternatives(const glassbox::traces::TraceStep& step, int k) {
  std::size_t n = 0;
  for (const auto& c : step.top)
    if (c.id != step.token && static_cast<int>(n) < k) ++n;
  return n;
}

CliResult render(const fs::path& trace, const fs::path& out, std::vector<std::string> extra = {}) {
  std::vector<std::string> a = {"trace", "render", trace.string(), "-o", out.string()};
  a.insert(a.end(), extra.begin(), extra.end());
  return run_cli(a);
}

}  // namespace

BOOST_AUTO_TEST_CASE(xml_checker_catches_broken_documents) {
  BOOST_TEST(xml_problem("<?xml version=\"1.0\"?><svg a=\"1\"><g><text>x &amp; y</text></g><p/></svg>").empty());
  BOOST_TEST(!xml_problem("<svg><g></svg>").empty());
  BOOST_TEST(!xml_problem("<svg><text>a < b</text></svg>").empty());
  BOOST_TEST(!xml_problem("<svg><text>a & b</text></svg>").empty());
  BOOST_TEST(!xml_problem("<svg a=1></svg>").empty());
  BOOST_TEST(!xml_problem("<svg></svg><svg></svg>").empty());
}

BOOST_AUTO_TEST_SUITE(render_cli, *boost::unit_test::precondition(NeedsShared()))

const int kTops[] = {0, 1, 3, 10};

// One node per chosen token plus its alternatives, and the root (the prompt).
BOOST_DATA_TEST_CASE(svg_is_well_formed_with_one_node_per_token_and_alternative, bdata::make(kTops), top) {
  const auto trace = sampled_basic_trace();
  const fs::path out = temp_dir("render-svg-" + std::to_string(top)) / "tree.svg";
  const auto r = render(trace, out, {"--top", std::to_string(top)});
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  const std::string svg = read_file(out);
  BOOST_TEST(xml_problem(svg) == "");
  BOOST_TEST(has(svg, "<svg"));
  const auto t = glassbox::traces::read_trace(trace.string());
  std::size_t alts = 0;
  for (const auto& s : t.steps) alts += alternatives(s, top);
  // wrapped every 10 steps: a row head for each row after the first
  const std::size_t rows = (t.steps.size() + 9) / 10;
  BOOST_TEST(count(svg, "<g id=\"node") == 1 + t.steps.size() + alts + (rows - 1));
  BOOST_TEST(count(svg, "class=\"node chosen\"") == t.steps.size());
  BOOST_TEST(count(svg, "class=\"node alternative\"") == alts);
  BOOST_TEST(count(svg, "class=\"node root\"") == 1u);
  BOOST_TEST(count(svg, "class=\"node row\"") == rows - 1);
  BOOST_TEST(count(svg, "<g id=\"edge") == t.steps.size() + alts);
  // labels: probabilities and the KV cache
  BOOST_TEST(has(svg, "KV 12/512"), "after the prefill the cache holds the 12 prompt positions of 512");
}

BOOST_AUTO_TEST_CASE(steps_range_dot_and_png) {
  const auto trace = greedy_full_trace();
  const fs::path dir = temp_dir("render-formats");
  // --steps A:B draws steps A..B-1 under a root holding the text so far
  auto r = render(trace, dir / "part.svg", {"--steps", "2:5", "--top", "2"});
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  const std::string svg = read_file(dir / "part.svg");
  BOOST_TEST(xml_problem(svg) == "");
  BOOST_TEST(count(svg, "class=\"node chosen\"") == 3u);
  BOOST_TEST(has(svg, "text so far"));
  // the format follows the extension, or --to
  r = render(trace, dir / "tree.dot");
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  const std::string dot = read_file(dir / "tree.dot");
  BOOST_TEST(dot.rfind("digraph", 0) == 0u);
  BOOST_TEST(count(dot, "class=chosen") == 12u);
  r = render(trace, dir / "tree.out", {"--to", "png", "--steps", ":4"});
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  BOOST_TEST(read_file(dir / "tree.out").rfind("\x89PNG\r\n\x1a\n", 0) == 0u);
}

// A long generation wraps into rows (it was one strip 16,621 px wide) and its probabilities read as numbers,
// not exponents (4.1e-06); --wrap 0 keeps one row.
BOOST_AUTO_TEST_CASE(long_trees_wrap_and_probabilities_are_readable) {
  const auto trace = stories_trace("render-long", {"--prompt", "Once upon a time", "--max-tokens", "48", "--sampler",
                                                   "top-k:40,temperature:1.0", "--seed", "3", "--ignore-eos"});
  const fs::path dir = temp_dir("render-long");
  auto width_pt = [](const std::string& svg) {
    const auto at = svg.find("<svg width=\"");
    return at == std::string::npos ? -1.0 : std::stod(svg.substr(at + 12));
  };
  auto r = render(trace, dir / "wrapped.svg", {"--top", "3"});
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  const std::string wrapped = read_file(dir / "wrapped.svg");
  BOOST_TEST(xml_problem(wrapped) == "");
  BOOST_TEST(count(wrapped, "class=\"node row\"") == 4u);  // 48 steps, 10 a row
  r = render(trace, dir / "strip.svg", {"--top", "3", "--wrap", "0"});
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  const std::string strip = read_file(dir / "strip.svg");
  BOOST_TEST(count(strip, "class=\"node row\"") == 0u);
  BOOST_TEST(width_pt(wrapped) > 0);
  BOOST_TEST(width_pt(wrapped) * 3 < width_pt(strip), "wrapped " << width_pt(wrapped) << " pt, one row " << width_pt(strip) << " pt");
  static const std::regex exponent(R"(\d\.\de[-+]\d\d)");
  BOOST_TEST(!std::regex_search(wrapped, exponent), "a probability written as an exponent");
  BOOST_TEST(has(wrapped, "&lt;0.001"), "the unlikely alternatives are said to be negligible");
}

BOOST_AUTO_TEST_CASE(bad_requests_are_exit_2) {
  const auto trace = greedy_full_trace();
  const fs::path dir = temp_dir("render-bad");
  auto r = render(trace, dir / "x.svg", {"--to", "gif"});
  BOOST_TEST(r.rc == 2);
  BOOST_TEST(has(r.err, "render format 'gif'"), r.err);
  r = render(trace, dir / "x.svg", {"--steps", "5:2"});
  BOOST_TEST(r.rc == 2);
  BOOST_TEST(has(r.err, "--steps '5:2'"), r.err);
  r = render(trace, dir / "x.svg", {"--steps", "99:"});
  BOOST_TEST(r.rc == 2);
  auto lines = read_lines(trace);
  lines.pop_back();
  write_lines(dir / "cut.jsonl", lines);
  r = render(dir / "cut.jsonl", dir / "x.svg");
  BOOST_TEST(r.rc == 2);
  BOOST_TEST(has(r.err, "cut short"), r.err);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_CASE(plugins_graph_draws_each_sampler_stage_in_order) {
  // DOT on stdout
  auto r = run_cli({"plugins", "--graph", "--sampler", "top-k:40,top-p:0.9,temperature:0.8"});
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  BOOST_TEST(r.out.rfind("digraph", 0) == 0u);
  const auto k = r.out.find("top-k"), p = r.out.find("top-p"), t = r.out.find("temperature"), d = r.out.find("SAMPLER 4");
  BOOST_TEST((k < p && p < t && t < d && d != std::string::npos), r.out);
  for (const char* box : {"TOKENIZE", "PREFILL", "DECODE", "DETOKENIZE", "kv-cache"}) BOOST_TEST(has(r.out, box), box);
  // the lesson's words: the logits become a probability distribution, which the chain then reshapes
  BOOST_TEST(has(r.out, "softmax → probability distribution"), r.out);
  BOOST_TEST(!has(r.out, "logits → candidates"), r.out);
  // an SVG file, parsed
  const fs::path dir = temp_dir("plugins-graph");
  r = run_cli({"plugins", "--graph", "-o", (dir / "pipe.svg").string(), "--attention", "kv-cache:64"});
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  const std::string svg = read_file(dir / "pipe.svg");
  BOOST_TEST(xml_problem(svg) == "");
  BOOST_TEST(count(svg, "class=\"node sampler\"") >= 2u);  // the default chain
  BOOST_TEST(has(svg, "capacity=64"));
  // mistakes
  BOOST_TEST(run_cli({"plugins", "--graph", "--sampler", "no-such-stage"}).rc == 2);
  BOOST_TEST(run_cli({"plugins", "--graph", "--to", "png"}).rc == 2);  // png needs -o
  BOOST_TEST(run_cli({"plugins", "-o", (dir / "x.svg").string()}).rc == 2);  // -o without --graph
  // without --graph the listing is unchanged
  r = run_cli({"plugins"});
  BOOST_TEST(r.rc == 0);
  BOOST_TEST(has(r.out, "search path:"));
}

// The one helper for a token's text as a person reads it (traces/include/glassbox/traces/token_text.hpp).
BOOST_AUTO_TEST_CASE(special_tokens_read_by_their_name) {
  using glassbox::traces::person_text;
  using glassbox::traces::special_name;
  BOOST_TEST(special_name("\n</s>\n") == "</s>");
  BOOST_TEST(special_name("\n<s>\n") == "<s>");
  BOOST_TEST(special_name("<|eot_id|>") == "<|eot_id|>");
  BOOST_TEST(special_name("</s>") == "</s>");
  BOOST_TEST(special_name("<b>") == "");  // text that merely looks like a tag
  BOOST_TEST(special_name(" a <b> c") == "");
  BOOST_TEST(special_name("< >") == "");
  BOOST_TEST(person_text("\n</s>\n") == "</s>");
  BOOST_TEST(person_text(" sunny") == " sunny");
  BOOST_TEST(person_text("\xE2") == "<0xE2>");  // half a character: its byte
  BOOST_TEST(person_text("a\xE2\x80") == "a<0xE2><0x80>");
  BOOST_TEST(person_text("\xE2\x80\x9C") == "\xE2\x80\x9C");  // a whole one: itself
  BOOST_TEST(glassbox::traces::show_text("\n</s>\n") == "</s>");
}
