// `glassbox trace html`: the viewer page with the trace's JSON put in place of its placeholder.
#include "glassbox/traces/html.hpp"

#include "glassbox/error.hpp"
#include "glassbox/traces/viewer_html.hpp"
#include "glassbox/traces/schema.hpp"

namespace glassbox::traces {

using nlohmann::json;

namespace {
constexpr std::string_view kPlaceholder = "@GLASSBOX_TRACE_JSON@";
}

std::string viewer_html() { return kViewerHtml; }

std::string trace_html(const Trace& t, const std::vector<std::string>& prompt_texts) {
  // The page's data is the trace's lines as the schema writes them (fields it does not know are not carried).
  json lines = json::array();
  lines.push_back(to_json(t.header));
  // Every logit lets the page re-apply another sampler chain exactly ("what this step would have looked
  // like"); past a few million numbers the page would be too heavy, and it falls back to the top candidates.
  constexpr std::size_t kMaxLogits = 4'000'000;
  const bool keep_logits = t.full() && t.steps.size() * static_cast<std::size_t>(t.vocab_size()) <= kMaxLogits;
  for (const auto& s : t.steps) {
    lines.push_back(to_json(s, keep_logits, /*decimal_logits=*/true));  // the page reads numbers
  }
  for (const auto& c : t.context) lines.push_back(to_json(c));  // context-policy firings (the viewer matches them by step)
  if (t.summary) lines.push_back(to_json(*t.summary));
  if (!prompt_texts.empty()) {
    if (prompt_texts.size() != t.header.prompt_ids.size())
      throw TraceError("internal: " + std::to_string(prompt_texts.size()) + " prompt texts for " +
                       std::to_string(t.header.prompt_ids.size()) + " prompt ids");
    lines.push_back({{"type", "prompt_texts"}, {"texts", prompt_texts}});
  }
  // Inside <script type="application/json"> only "</script" or "<!--" could end or confuse the element;
  // '<' never occurs in JSON outside strings, so writing it as \u003c inside them removes both.
  std::string data;
  const std::string dumped = dump(lines);
  data.reserve(dumped.size());
  for (char ch : dumped) {
    if (ch == '<') data += "\\u003c";
    else data += ch;
  }
  std::string page = kViewerHtml;
  const auto at = page.find(kPlaceholder);
  if (at == std::string::npos) throw TraceError("internal: the viewer page has no trace placeholder");
  page.replace(at, kPlaceholder.size(), data);
  return page;
}

}  // namespace glassbox::traces
