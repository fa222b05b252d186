// `glassbox trace html`: one self-contained page, checked as text and then in headless Chromium
// (skipped, with the reason, when no Chromium is installed: GLASSBOX_DEPS_EXTRA=browser tools/install-deps.sh).
//
// GLASSBOX_UPDATE_SCREENSHOT=1 ctest -R trace_html also rewrites docs/images/trace-viewer.png.
#define BOOST_TEST_MODULE trace_html
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <optional>
#include <regex>

#include "browser.hpp"
#include "glassbox/traces/html.hpp"
#include "glassbox/traces/schema.hpp"
#include "support.hpp"
#include "trace_fixtures.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace gbtest;

namespace {

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

fs::path page_for(const fs::path& trace, const std::string& tag) {
  const fs::path out = temp_dir("html-" + tag) / "viewer.html";
  const auto r = run_cli({"trace", "html", trace.string(), "-o", out.string()});
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  return out;
}

// The JSON embedded in the page, parsed back.
json embedded(const std::string& page) {
  const std::string open = "<script type=\"application/json\" id=\"trace-data\">";
  const auto a = page.find(open);
  const auto b = page.find("</script>", a);
  BOOST_TEST_REQUIRE((a != std::string::npos && b != std::string::npos));
  return json::parse(page.substr(a + open.size(), b - a - open.size()));
}

// `page` with its embedded data replaced by `data` (JSON text, '<' already escaped).
std::string viewer_with(std::string page, const std::string& data) {
  const std::string open = "<script type=\"application/json\" id=\"trace-data\">";
  const auto a = page.find(open) + open.size();
  page.replace(a, page.find("</script>", a) - a, data);
  return page;
}

fs::path tricky_trace() {
  // a prompt that would end the data element, or open a comment, if it were embedded raw
  return stories_trace("tricky", {"--prompt", "</script><script>alert(1)</script><!-- \"quoted\" & 'single'",
                                  "--max-tokens", "6", "--sampler", "greedy", "--seed", "1"});
}

}  // namespace

BOOST_AUTO_TEST_SUITE(page, *boost::unit_test::precondition(NeedsShared()))

BOOST_AUTO_TEST_CASE(page_is_self_contained_and_embeds_the_trace) {
  const auto trace = sampled_basic_trace();
  const std::string page = read_file(page_for(trace, "self"));
  for (const char* remote : {"<script src", "<link", "src=\"http", "href=\"http", "url(http", "@import", "fetch(",
                             "XMLHttpRequest"})
    BOOST_TEST(!has(page, remote), remote);
  const json data = embedded(page);
  const auto lines = read_jsonl(trace);
  // the trace's lines, then the prompt's token texts (its tokenizer is found from here)
  BOOST_TEST(data.size() == lines.size() + 1);
  BOOST_TEST(data[0]["type"] == "header");
  BOOST_TEST(data[data.size() - 2]["type"] == "summary");
  BOOST_TEST(data.back()["type"] == "prompt_texts");
  BOOST_TEST(data.back()["texts"].size() == lines[0]["prompt_ids"].size());
  BOOST_TEST(data.back()["texts"][0] == "<s>");  // BOS by its name
  BOOST_TEST(data.back()["texts"][1] == "Lily");
  BOOST_TEST(data[3]["top"] == lines[3]["top"]);
  BOOST_TEST(!has(page, "@GLASSBOX_TRACE_JSON@"));
}

// A full trace of a small model keeps its logits (the page's sampling controls re-apply a chain to them).
BOOST_AUTO_TEST_CASE(logits_of_a_small_full_trace_are_kept) {
  const std::string page = read_file(page_for(greedy_full_trace(), "logits"));
  const auto lines = read_jsonl(greedy_full_trace());
  const json data = embedded(page);
  BOOST_TEST(data[1]["logits"].is_array());  // numbers for the page's script, whatever the trace wrote
  BOOST_TEST(step_logits(data[1]) == step_logits(lines[1]));
}

BOOST_AUTO_TEST_CASE(text_cannot_break_out_of_the_data_element) {
  const std::string page = read_file(page_for(tricky_trace(), "tricky"));
  BOOST_TEST(count(page, "</script>") == 4u);  // the error hook, the what-if panel, the data element, the viewer
  BOOST_TEST(!has(page, "<script>alert"));
  BOOST_TEST(embedded(page)[0]["prompt"] == "</script><script>alert(1)</script><!-- \"quoted\" & 'single'");
}

BOOST_AUTO_TEST_SUITE_END()

// The viewer page reads the trace format versions the C++ readers read (schema.hpp kReadableSchemas): its own
// list, READABLE_SCHEMAS, names the same ones in the same order.
BOOST_AUTO_TEST_CASE(the_viewer_reads_the_versions_the_readers_read) {
  const std::string page = glassbox::traces::viewer_html();
  const std::string open = "var READABLE_SCHEMAS = [";
  const auto a = page.find(open);
  BOOST_TEST_REQUIRE(a != std::string::npos, "no READABLE_SCHEMAS in traces/viewer/viewer.html");
  std::string list = page.substr(a + open.size() - 1, page.find(']', a) - a - open.size() + 2);
  std::replace(list.begin(), list.end(), '\'', '"');
  const auto got = json::parse(list).get<std::vector<std::string>>();
  const std::vector<std::string> want(glassbox::traces::kReadableSchemas.begin(), glassbox::traces::kReadableSchemas.end());
  BOOST_TEST(got == want, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE(browser, *boost::unit_test::precondition(NeedsShared()) *
                                   boost::unit_test::precondition(NeedsChromium()))

// A page whose trace holds its logits as base64 (as a file opened in the raw viewer does: glassbox.trace/2's
// default, and legacy /1 files) under each version: /1 and /2 show every logit in the what-if panel, with no
// console error; another version is refused naming it.
const char* const kViewerSchemas[] = {"glassbox.trace/1", "glassbox.trace/2", "glassbox.trace/3"};
BOOST_DATA_TEST_CASE(the_viewer_reads_base64_logits_and_refuses_unknown_versions, boost::unit_test::data::make(kViewerSchemas),
                     schema) {
  const fs::path page = page_for(greedy_full_trace(), std::string("versions-") + std::string(schema).back());
  const auto lines = read_jsonl(greedy_full_trace());
  json data = embedded(read_file(page));
  data[0]["schema"] = schema;
  for (std::size_t i = 1; i < lines.size(); ++i)
    if (lines[i]["type"] == "step") {
      BOOST_TEST_REQUIRE(lines[i]["logits"].is_string());
      data[i]["logits"] = lines[i]["logits"];
    }
  std::string text;
  for (char c : data.dump()) text += c == '<' ? std::string("\\u003c") : std::string(1, c);
  std::string html = viewer_with(read_file(page), text);
  write_file(page, html);
  const auto b = browse(page, "--dump-dom");
  BOOST_TEST_REQUIRE(b.rc == 0, b.err);
  if (std::string(schema) != "glassbox.trace/3") {
    BOOST_TEST(has(b.out, "data-ready=\"1\""), "the viewer's script did not finish");
    BOOST_TEST(has(b.out, "id=\"console-errors\" data-count=\"0\""), b.out.substr(0, 2000));
    BOOST_TEST(has(b.out, "the step's 512 recorded logits (exact)"), b.out.substr(0, 2000));
  } else {
    BOOST_TEST(has(b.out, "id=\"console-errors\" data-count=\"1\""), b.out.substr(0, 2000));
    BOOST_TEST(has(b.out, "unknown schema \"glassbox.trace/3\" (this viewer reads glassbox.trace/1 or glassbox.trace/2)"),
               b.out.substr(0, 2000));
  }
}

BOOST_AUTO_TEST_CASE(renders_in_headless_chromium_with_zero_console_errors) {
  const auto trace = sampled_basic_trace();
  const auto lines = read_jsonl(trace);
  const std::size_t steps = lines.size() - 2;
  const auto b = browse(page_for(trace, "chromium"), "--dump-dom");
  BOOST_TEST_REQUIRE(b.rc == 0, b.err);
  const std::string& dom = b.out;
  BOOST_TEST(has(dom, "data-ready=\"1\""), "the viewer's script did not finish");
  BOOST_TEST(has(dom, "id=\"console-errors\" data-count=\"0\""), dom.substr(0, 2000));
  BOOST_TEST(console_lines(b.err).empty(), "console: " << (console_lines(b.err).empty() ? "" : console_lines(b.err)[0]));
  // the parts the viewer builds from the trace
  BOOST_TEST(count(dom, "class=\"cell ") == steps);                    // timeline
  BOOST_TEST(count(dom, "class=\"tok") == steps);                      // text so far
  BOOST_TEST(has(dom, "class=\"tok current\""));                       // highlighted token
  BOOST_TEST(count(dom, "<div class=\"stage\">") == 1 + lines[1]["stages"].size());  // model + each stage
  BOOST_TEST(has(dom, "1. top-k (k=40)"));
  BOOST_TEST(has(dom, "2. temperature (temperature=0.8)"));
  for (const char* chart : {"chart-entropy", "chart-kv", "chart-time"}) {
    const auto at = dom.find(std::string("id=\"") + chart + "\"");
    BOOST_TEST_REQUIRE(at != std::string::npos, chart);
    const auto end = dom.find("</svg>", at);
    BOOST_TEST(dom.substr(at, end - at).find("<line") != std::string::npos, chart << " drew nothing");
  }
  BOOST_TEST(count(dom, "class=\"bar-prefill\"") == 1u);
  BOOST_TEST(count(dom, "class=\"bar-decode\"") == steps - 1);
  BOOST_TEST(has(dom, "positions ("), "KV legend");
}

// The attention heatmap (--trace-attention) and the module's state: blocks for paged, the window for
// sliding-window, and the context line that a shift leaves.
BOOST_AUTO_TEST_CASE(draws_attention_weights_and_the_kv_state) {
  const auto paged = stories_trace("attn-paged", {"--prompt", "Once upon a time", "--max-tokens", "30", "--sampler", "greedy",
                                                  "--attention", "paged:4", "--context", "24", "--context-policy", "shift:2",
                                                  "--trace-attention", "all"});
  const auto b = browse(page_for(paged, "attn-paged"), "--dump-dom", "#step=29");
  BOOST_TEST_REQUIRE(b.rc == 0, b.err);
  BOOST_TEST(has(b.out, "data-ready=\"1\""));
  BOOST_TEST(has(b.out, "id=\"console-errors\" data-count=\"0\""), b.out.substr(0, 2000));
  BOOST_TEST(console_lines(b.err).empty(), "console: " << (console_lines(b.err).empty() ? "" : console_lines(b.err)[0]));
  const auto lines = read_jsonl(paged);
  const json* last = nullptr;
  for (const auto& l : lines)
    if (l["type"] == "step") last = &l;
  BOOST_TEST_REQUIRE(last != nullptr);
  // one box per block of the block table, one heatmap cell per (layer, head, position attended)
  BOOST_TEST(count(b.out, "class=\"kv-block\"") == (*last)["kv"]["block_table"].size());
  std::size_t cells = 0;
  for (const auto& r : (*last)["attention"]) cells += r["weights"].size();
  BOOST_TEST(cells > 0u);
  BOOST_TEST(count(b.out, "class=\"attn-cell\"") == cells);
  BOOST_TEST(has(b.out, "each head looks most at"));

  const auto window = stories_trace("attn-window", {"--prompt", "Once upon a time", "--max-tokens", "20", "--sampler", "greedy",
                                                    "--attention", "sliding-window:8", "--trace-attention", "0:0"});
  const auto w = browse(page_for(window, "attn-window"), "--dump-dom", "#step=19");
  BOOST_TEST_REQUIRE(w.rc == 0, w.err);
  BOOST_TEST(has(w.out, "id=\"console-errors\" data-count=\"0\""));
  BOOST_TEST(count(w.out, "class=\"kv-pos held\"") == 8u);  // the window
  BOOST_TEST(count(w.out, "class=\"attn-cell\"") == 8u);   // one head over the window
}

// Every text element of one class in the DOM, in order ("<text class=\"attn-xlabel\" ...>TEXT</text>").
std::vector<std::string> texts_of(const std::string& dom, const std::string& cls) {
  std::vector<std::string> out;
  const std::string open = "class=\"" + cls;
  for (auto at = dom.find(open); at != std::string::npos; at = dom.find(open, at + 1)) {
    const auto gt = dom.find('>', at), end = dom.find("</text>", gt);
    out.push_back(dom.substr(gt + 1, end - gt - 1));
  }
  return out;
}

// The attention matrix labels both axes with token texts (the prompt's from its tokenizer, not #ID), marks
// what a sliding window no longer holds as gone, and shows every head grouped by its K/V head.
BOOST_AUTO_TEST_CASE(attention_axes_are_token_texts_and_gone_positions_are_marked) {
  const auto t = stories_trace("attn-labels", {"--prompt", "Once upon a time there was", "--max-tokens", "14", "--sampler", "greedy",
                                               "--attention", "sliding-window:8", "--trace-attention", "all"});
  const auto b = browse(page_for(t, "attn-labels"), "--dump-dom", "#step=13");
  BOOST_TEST_REQUIRE(b.rc == 0, b.err);
  BOOST_TEST(has(b.out, "id=\"console-errors\" data-count=\"0\""), b.out.substr(0, 2000));
  BOOST_TEST(console_lines(b.err).empty(), "console: " << (console_lines(b.err).empty() ? "" : console_lines(b.err)[0]));
  const auto x = texts_of(b.out, "attn-xlabel"), y = texts_of(b.out, "attn-ylabel");
  BOOST_TEST_REQUIRE(!x.empty());
  BOOST_TEST_REQUIRE(y.size() == 14u);  // one row per step, the query token fed there
  for (const auto& l : x) BOOST_TEST(l.rfind("#", 0) != 0u, "an axis label is an id, not a text: " << l);
  auto named = [&](const std::vector<std::string>& v, const std::string& text) { return std::find(v.begin(), v.end(), text) != v.end(); };
  BOOST_TEST(named(x, "\"Once\""));
  BOOST_TEST(named(x, "\" upon\""));
  BOOST_TEST(named(y, "\" was\""));  // the prefill's query: the prompt's last token
  BOOST_TEST(named(x, "&lt;s&gt; (special)"));
  // a window of 8 over 6 + 14 positions: the early columns are gone for the late rows
  BOOST_TEST(count(b.out, "attn-gone-cell") > 0u);
  // stories260K: 8 heads over 4 K/V heads, every head of 5 layers recorded
  BOOST_TEST(count(b.out, "class=\"attn-head-label\"") == 40u);
  BOOST_TEST(has(b.out, ">L4 h7 kv3</text>"));
  BOOST_TEST(has(b.out, "shares K/V head 0 with heads 0, 1"));
  BOOST_TEST(count(b.out, "<option value=") >= 5u + 8u);  // the layer and head selectors
}

// After a policy drops tokens the text panel shows them struck out; a recompute run's KV panel says there
// is no cache instead of a percentage of zero.
BOOST_AUTO_TEST_CASE(dropped_text_is_shown_as_dropped_and_recompute_says_no_cache) {
  const auto t = stories_trace("drop-text", {"--prompt", "Once upon a time there was", "--max-tokens", "12", "--sampler", "greedy",
                                             "--context", "12", "--context-policy", "truncate-left"});
  const auto b = browse(page_for(t, "drop-text"), "--dump-dom", "#step=11");
  BOOST_TEST_REQUIRE(b.rc == 0, b.err);
  BOOST_TEST(has(b.out, "id=\"console-errors\" data-count=\"0\""), b.out.substr(0, 2000));
  BOOST_TEST(count(b.out, "class=\"prompt gone\"") > 0u, "no prompt token struck out");
  BOOST_TEST(has(b.out, "the model no longer sees it"));
  const auto early = browse(page_for(t, "drop-text-0"), "--dump-dom", "#step=0");
  BOOST_TEST(count(early.out, "class=\"prompt gone\"") == 0u, "struck out before the drop");

  const auto r = stories_trace("recompute", {"--prompt", "Once upon a time", "--max-tokens", "6", "--sampler", "greedy",
                                             "--attention", "recompute"});
  const auto k = browse(page_for(r, "recompute"), "--dump-dom", "#step=5");
  BOOST_TEST(has(k.out, "id=\"console-errors\" data-count=\"0\""), k.out.substr(0, 2000));
  BOOST_TEST(!has(k.out, "of 0 positions"), k.out.substr(0, 4000));
  BOOST_TEST(has(k.out, "no cache (recompute): nothing is kept between steps</span>"), k.out.substr(0, 4000));
}

// A chat turn whose oldest exchange was summarized (--context-policy summarize): the text panel shows the
// replaced turns struck out as summarized, then the summary that took their place.
BOOST_AUTO_TEST_CASE(a_summarized_chat_turn_shows_what_replaced_what) {
  const fs::path dir = temp_dir("summarized-chat");
  write_file(dir / "turns.txt", "My name is Lily.\nWhat is my name?\n");
  const auto r = run_cli({"chat", "--input", (dir / "turns.txt").string(), "--seed", "1", "--max-tokens", "6", "--context", "48",
                          "--context-policy", "summarize", "--summary-tokens", "8", "--trace", (dir / "c.jsonl").string()});
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  const std::string text = read_jsonl(dir / "c-turn2.jsonl").at(1)["summary"]["text"];
  const auto b = browse(page_for(dir / "c-turn2.jsonl", "summary"), "--dump-dom", "#step=0");
  BOOST_TEST_REQUIRE(b.rc == 0, b.err);
  BOOST_TEST(has(b.out, "id=\"console-errors\" data-count=\"0\""), b.out.substr(0, 2000));
  BOOST_TEST(has(b.out, "My name is Lily."), "the replaced turn is not shown");
  BOOST_TEST(has(b.out, "[summarized] </span>"), b.out.substr(0, 4000));
  // the mark stands before what it marks, not before the first kept line
  BOOST_TEST(b.out.find("[summarized] </span>") < b.out.find("My name is Lily."), b.out.substr(0, 4000));
  BOOST_TEST(has(b.out, "[summary: " + text + "] </span>"), b.out.substr(0, 4000));
}

// A lens on each step (the field a --trace-lens run writes: {"layer", "top": [...]} per block, and points
// inside a block): the grid has one cell per (layer, point) and step, each its top token; no lens, no panel.
BOOST_AUTO_TEST_CASE(lens_grid_has_a_cell_per_layer_and_step) {
  const auto trace = sampled_basic_trace();
  const fs::path page = page_for(trace, "lens");
  std::string html = read_file(page);
  json data = embedded(html);
  const int layers = data[0]["model"]["config"]["n_layers"];
  int steps = 0;
  for (auto& l : data) {
    if (l["type"] != "step") continue;
    ++steps;
    json lens = json::array();
    for (int layer = 1; layer <= layers; ++layer) {
      // made-up but well-formed: the step's own top candidates, sharper with depth; the last block is the step's
      json top = json::array();
      for (std::size_t k = 0; k < 3 && k < l["top"].size(); ++k)
        top.push_back({{"id", l["top"][k]["id"]}, {"text", l["top"][k]["text"]},
                       {"prob", layer == layers ? l["top"][k]["prob"].get<double>() : l["top"][k]["prob"].get<double>() * layer / layers}});
      lens.push_back({{"layer", layer}, {"top", top}});
      if (layer == 2) lens.push_back({{"layer", layer}, {"point", "attn"}, {"top", top}});
    }
    l["lens"] = lens;
  }
  const std::string open = "<script type=\"application/json\" id=\"trace-data\">";
  const auto a = html.find(open) + open.size(), e = html.find("</script>", a);
  std::string dumped;
  for (char c : data.dump()) dumped += c == '<' ? std::string("\\u003c") : std::string(1, c);
  html.replace(a, e - a, dumped);
  write_file(page, html);
  const auto b = browse(page, "--dump-dom", "#step=3");
  BOOST_TEST_REQUIRE(b.rc == 0, b.err);
  BOOST_TEST(has(b.out, "id=\"console-errors\" data-count=\"0\""), b.out.substr(0, 2000));
  BOOST_TEST(count(b.out, "class=\"lens-cell") == static_cast<std::size_t>((layers + 1) * steps));
  BOOST_TEST(count(b.out, "class=\"lens-cell current\"") == static_cast<std::size_t>(layers + 1));
  BOOST_TEST(has(b.out, ">layer 2 attn</th>"));
  BOOST_TEST(!has(b.out, "id=\"lens-section\" class=\"wide\" hidden"));
  // every cell shows its probability, not only on hover; the answer is on top from layer 1 on (made so above)
  BOOST_TEST(count(b.out, "<span class=\"p\">") == static_cast<std::size_t>((layers + 1) * steps));
  BOOST_TEST(count(b.out, "class=\"lens-settles\"") == static_cast<std::size_t>(steps));
  BOOST_TEST(count(b.out, ">layer 1</td>") == static_cast<std::size_t>(steps));
  // without a lens the panel stays hidden
  const auto plain = browse(page_for(trace, "no-lens"), "--dump-dom");
  BOOST_TEST(has(plain.out, "id=\"lens-section\" class=\"wide\" hidden"));
  BOOST_TEST(count(plain.out, "class=\"lens-cell") == 0u);
}

// The attention panel: the caption names, for the shown step, the position each head looks at most, the
// positions drawing the most weight first; #layer=L&head=H opens on that head (a bookmark); one that was not
// recorded is said in the page's errors.
BOOST_AUTO_TEST_CASE(attention_caption_names_the_heads_and_the_address_picks_one) {
  const auto t = stories_trace("attn-labels", {"--prompt", "Once upon a time there was", "--max-tokens", "14", "--sampler", "greedy",
                                               "--attention", "sliding-window:8", "--trace-attention", "all"});
  const auto b = browse(page_for(t, "attn-caption"), "--dump-dom", "#step=13&layer=2&head=3");
  BOOST_TEST_REQUIRE(b.rc == 0, b.err);
  BOOST_TEST(has(b.out, "id=\"console-errors\" data-count=\"0\""), b.out.substr(0, 2000));
  BOOST_TEST(has(b.out, ">layer 2, head 3 (shares K/V head 1 with heads 2, 3)</span>"), b.out.substr(0, 4000));
  BOOST_TEST(has(b.out, ">L2 h3 kv1</text>"));
  // the position drawing the most weight over every head's most attended one, worked out from the trace
  std::optional<json> step;
  for (const auto& l : read_jsonl(t))
    if (l["type"] == "step" && l["step"] == 13) step = l;
  BOOST_TEST_REQUIRE(step.has_value());
  std::map<int, double> mass;
  for (const auto& r : (*step)["attention"]) {
    const auto& w = r["weights"];
    std::size_t best = 0;
    for (std::size_t k = 1; k < w.size(); ++k)
      if (w[k].get<double>() > w[best].get<double>()) best = k;
    mass[r["first_pos"].get<int>() + static_cast<int>(best)] += w[best].get<double>();
  }
  int top = -1;
  for (const auto& [pos, m] : mass)
    if (top < 0 || m > mass[top]) top = pos;
  const std::string target = "class=\"attn-target\" data-pos=\"";
  const auto at = b.out.find(target);
  BOOST_TEST_REQUIRE(at != std::string::npos, b.out.substr(0, 4000));
  BOOST_TEST(std::stoi(b.out.substr(at + target.size())) == top);
  const auto bad = browse(page_for(t, "attn-bad-head"), "--dump-dom", "#layer=9&head=0");
  BOOST_TEST(has(bad.out, "id=\"console-errors\" data-count=\"1\""), bad.out.substr(0, 2000));
  BOOST_TEST(has(bad.out, "no such recorded head"));
}

// A long run (78 positions) and stories260K's 40 heads: no two axis labels overprint (column labels stand at
// least a 10 px font's line apart, row labels likewise), and the panel spans the page's width.
BOOST_AUTO_TEST_CASE(attention_labels_do_not_overprint) {
  const auto t = stories_trace("attn-long", {"--prompt", "Once upon a time there was a little girl", "--max-tokens", "70",
                                             "--sampler", "greedy", "--ignore-eos", "--trace-attention", "all"});
  const auto b = browse(page_for(t, "attn-long"), "--dump-dom", "#step=69");
  BOOST_TEST_REQUIRE(b.rc == 0, b.err);
  BOOST_TEST(has(b.out, "id=\"console-errors\" data-count=\"0\""), b.out.substr(0, 2000));
  BOOST_TEST(has(b.out, "id=\"attn-section\" class=\"wide\""));
  // each <text> of a class in one svg: its x (from translate) or y, in order
  auto coords = [&](const std::string& svg_id, const std::string& cls, bool x) {
    const auto from = b.out.find("id=\"" + svg_id + "\""), to = b.out.find("</svg>", from);
    std::vector<double> v;
    const std::string part = b.out.substr(from, to - from);
    static const std::regex tag("<text [^>]*>");
    for (auto it = std::sregex_iterator(part.begin(), part.end(), tag); it != std::sregex_iterator(); ++it) {
      const std::string t = it->str();
      if (t.find("class=\"" + cls) == std::string::npos) continue;
      std::smatch m;
      static const std::regex tr(R"re(translate\(([-0-9.]+),)re"), yy(R"re( y="([-0-9.]+)")re");
      if (x ? std::regex_search(t, m, tr) : std::regex_search(t, m, yy)) v.push_back(std::stod(m[1]));
    }
    std::sort(v.begin(), v.end());
    return v;
  };
  auto min_gap = [](const std::vector<double>& v) {
    double g = 1e9;
    for (std::size_t i = 1; i < v.size(); ++i) g = std::min(g, v[i] - v[i - 1]);
    return g;
  };
  const auto mx = coords("attn-matrix", "attn-xlabel", true), hx = coords("attn-heatmap", "attn-xlabel", true);
  const auto my = coords("attn-matrix", "attn-ylabel", false), hy = coords("attn-heatmap", "attn-head-label", false);
  BOOST_TEST_REQUIRE(mx.size() >= 5u);
  BOOST_TEST_REQUIRE(hx.size() >= 5u);
  BOOST_TEST(min_gap(mx) >= 10.5, "matrix column labels " << min_gap(mx) << " px apart");
  BOOST_TEST(min_gap(hx) >= 10.5, "heads' column labels " << min_gap(hx) << " px apart");
  BOOST_TEST(min_gap(my) >= 9.5, "matrix row labels " << min_gap(my) << " px apart");
  BOOST_TEST(min_gap(hy) >= 9.5, "head labels " << min_gap(hy) << " px apart");
  BOOST_TEST(hy.size() == 40u);  // 5 layers × 8 heads, each named
}

// The same grid from a real `run --trace-lens all` trace (stories260K: 5 layers, a point inside and after each).
BOOST_AUTO_TEST_CASE(a_real_lens_trace_fills_the_grid) {
  const auto t = stories_trace("real-lens", {"--prompt", "Once upon a time", "--max-tokens", "4", "--sampler", "greedy",
                                             "--trace-lens", "all", "--trace-top", "3"});
  const auto b = browse(page_for(t, "real-lens"), "--dump-dom", "#step=2");
  BOOST_TEST_REQUIRE(b.rc == 0, b.err);
  BOOST_TEST(has(b.out, "id=\"console-errors\" data-count=\"0\""), b.out.substr(0, 2000));
  BOOST_TEST(count(b.out, "class=\"lens-cell") == static_cast<std::size_t>(2 * 5 * 4));
  BOOST_TEST(count(b.out, "class=\"lens-cell current\"") == 10u);
  BOOST_TEST(has(b.out, ">layer 5 attn</th>"));
}

BOOST_AUTO_TEST_CASE(a_step_in_the_address_opens_there) {
  const auto b = browse(page_for(sampled_basic_trace(), "fragment"), "--dump-dom", "#step=5");
  BOOST_TEST_REQUIRE(b.rc == 0, b.err);
  BOOST_TEST(has(b.out, "step 5 / 15 · decode"), b.out.substr(0, 3000));
  BOOST_TEST(count(b.out, "class=\"tok\" data-step") + count(b.out, "class=\"tok low\" data-step") +
                 count(b.out, "class=\"tok current") + count(b.out, "class=\"tok low current") ==
             16u);
}

BOOST_AUTO_TEST_CASE(tricky_text_shows_as_text) {
  const auto b = browse(page_for(tricky_trace(), "tricky-browser"), "--dump-dom");
  BOOST_TEST_REQUIRE(b.rc == 0, b.err);
  BOOST_TEST(has(b.out, "data-ready=\"1\""));
  BOOST_TEST(has(b.out, "id=\"console-errors\" data-count=\"0\""));
  // the text panel (one span per prompt token), its tags removed: the prompt's characters, as text
  const auto a = b.out.find("id=\"text\""), e = b.out.find("</section>", a);
  std::string panel;
  bool in_tag = false;
  for (char c : b.out.substr(a, e - a)) {
    if (c == '<') in_tag = true;
    else if (c == '>') in_tag = false;
    else if (!in_tag) panel += c;
  }
  BOOST_TEST(has(panel, "&lt;/script&gt;&lt;script&gt;alert(1)"), "the prompt is shown as text: " << panel);
}

// The error hook itself works: a page with a script error reports it in the DOM (so zero means zero).
BOOST_AUTO_TEST_CASE(the_console_error_hook_reports_errors) {
  const fs::path page = page_for(sampled_basic_trace(), "broken");
  std::string html = read_file(page);
  html.insert(html.rfind("</body>"), "<script>console.error('deliberate'); undefinedFunction();</script>\n");
  write_file(page, html);
  const auto b = browse(page, "--dump-dom");
  BOOST_TEST_REQUIRE(b.rc == 0, b.err);
  BOOST_TEST(has(b.out, "id=\"console-errors\" data-count=\"2\""), b.out.substr(0, 2000));
  BOOST_TEST(has(b.out, "deliberate"));
  BOOST_TEST(!console_lines(b.err).empty());
}

BOOST_AUTO_TEST_CASE(screenshot) {
  const auto trace = stories_trace("screenshot", {"--prompt", "Once upon a time", "--max-tokens", "40", "--sampler",
                                                  "top-k:40,temperature:0.8", "--seed", "7", "--trace-attention", "all"});
  const fs::path page = page_for(trace, "screenshot");
  const fs::path png = page.parent_path() / "trace-viewer.png";
  const auto b = browse(page, "--window-size=1400,1400 --screenshot=" + quote(png.string()), "#step=21");
  BOOST_TEST_REQUIRE(b.rc == 0, b.err);
  const std::string img = read_file(png);
  BOOST_TEST_REQUIRE(img.rfind("\x89PNG\r\n\x1a\n", 0) == 0u);
  auto be32 = [&](std::size_t at) {
    return (static_cast<unsigned char>(img[at]) << 24) | (static_cast<unsigned char>(img[at + 1]) << 16) |
           (static_cast<unsigned char>(img[at + 2]) << 8) | static_cast<unsigned char>(img[at + 3]);
  };
  BOOST_TEST(be32(16) == 1400u);  // IHDR width, height
  BOOST_TEST(be32(20) == 1400u);
  BOOST_TEST(img.size() > 40'000u, "a blank page compresses to a few KB");
  if (const char* u = std::getenv("GLASSBOX_UPDATE_SCREENSHOT"); u && *u && std::string(u) != "0") {
    const fs::path dest = fs::path(GLASSBOX_SOURCE_DIR) / "docs" / "images" / "trace-viewer.png";
    fs::create_directories(dest.parent_path());
    fs::copy_file(png, dest, fs::copy_options::overwrite_existing);
    BOOST_TEST_MESSAGE("GLASSBOX_UPDATE_SCREENSHOT: wrote " << dest.string());
  }
}

BOOST_AUTO_TEST_SUITE_END()
