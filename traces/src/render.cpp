// Graphviz drawings through libgvc/libcgraph: the token tree of a trace, and the pipeline of a run.
#include "glassbox/traces/render.hpp"

#include <gvc.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>

#include "glassbox/error.hpp"
#include "glassbox/file_io.hpp"
#include "glassbox/traces/token_text.hpp"

namespace glassbox::traces {


namespace {

// cgraph's C API takes char*; it copies every string it is given.
char* c(const std::string& s) { return const_cast<char*>(s.c_str()); }
char* c(const char* s) { return const_cast<char*>(s); }

// A graph and the Graphviz context that lays it out, freed together.
class Graph {
 public:
  explicit Graph(const char* name) {
    gvc_ = gvContext();
    if (!gvc_) throw TraceError("Graphviz: cannot create a context");
    g_ = agopen(c(name), Agdirected, nullptr);
  }
  ~Graph() {
    if (laid_out_) gvFreeLayout(gvc_, g_);
    agclose(g_);
    gvFreeContext(gvc_);
  }
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  void graph_attr(const char* k, const std::string& v) { agattr(g_, AGRAPH, c(k), c(v)); }
  void node_default(const char* k, const std::string& v) { agattr(g_, AGNODE, c(k), c(v)); }
  void edge_default(const char* k, const std::string& v) { agattr(g_, AGEDGE, c(k), c(v)); }

  Agnode_t* node(const std::string& id, std::initializer_list<std::pair<const char*, std::string>> attrs,
                 Agraph_t* in = nullptr) {
    Agnode_t* n = agnode(in ? in : g_, c(id), 1);
    for (const auto& [k, v] : attrs) agsafeset(n, c(k), c(v), c(""));
    return n;
  }
  Agedge_t* edge(Agnode_t* a, Agnode_t* b, std::initializer_list<std::pair<const char*, std::string>> attrs) {
    Agedge_t* e = agedge(g_, a, b, nullptr, 1);
    for (const auto& [k, v] : attrs) agsafeset(e, c(k), c(v), c(""));
    return e;
  }
  Agraph_t* subgraph(const std::string& name) { return agsubg(g_, c(name), 1); }

  // The DOT source, before layout.
  std::string dot() {
    char* buf = nullptr;
    std::size_t len = 0;
    FILE* f = open_memstream(&buf, &len);
    if (!f) throw TraceError("Graphviz: cannot open a memory stream");
    agwrite(g_, f);
    std::fclose(f);
    std::string s(buf, len);
    std::free(buf);
    return s;
  }

  void render(const std::string& format, const std::string& path) {
    check_render_format(format);
    if (format == "dot") {
      write_file_atomically(path, dot());
      return;
    }
    if (gvLayout(gvc_, g_, "dot") != 0)
      throw TraceError("Graphviz: the dot layout failed (is the layout plugin installed? `dot -c` registers plugins)");
    laid_out_ = true;
    char* data = nullptr;
    unsigned int len = 0;
    if (gvRenderData(gvc_, g_, format.c_str(), &data, &len) != 0 || !data)
      throw TraceError("Graphviz: cannot render " + format +
                       (format == "png" ? std::string(" (PNG needs Graphviz's cairo plugin, libgvplugin_pango)") : std::string()));
    const std::string bytes(data, len);
    gvFreeRenderData(data);
    write_file_atomically(path, bytes);
  }

 private:
  GVC_t* gvc_ = nullptr;
  Agraph_t* g_ = nullptr;
  bool laid_out_ = false;
};

// A token for a label: quoted, with newlines and control bytes made visible and backslashes escaped
// (Graphviz reads "\n", "\l" in labels as line breaks).
std::string label_text(const std::string& raw, std::size_t max_chars = 18) {
  // A special token by its bare name (</s>, not "\n</s>\n"), unquoted; stray bytes as <0xNN> (token_text.hpp).
  if (const std::string name = special_name(raw); !name.empty()) return name;
  const std::string text = person_text(raw);
  std::string out = "\"";
  std::size_t chars = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const unsigned char ch = static_cast<unsigned char>(text[i]);
    if ((ch & 0xC0) != 0x80 && ++chars > max_chars) {
      out += "…";
      break;
    }
    if (ch == '\n') out += "\\\\n";
    else if (ch == '\t') out += "\\\\t";
    else if (ch == '\\') out += "\\\\";
    else if (ch < 0x20 || ch == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "<%02X>", ch);
      out += buf;
    } else out += static_cast<char>(ch);
  }
  return out + "\"";
}

// The end of a longer text (the context before the first drawn step), escaped for a label.
std::string tail_text(const std::string& text, std::size_t max_chars) {
  std::vector<std::size_t> starts;  // byte offset of each UTF-8 character
  for (std::size_t i = 0; i < text.size(); ++i)
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) starts.push_back(i);
  std::string t = starts.size() > max_chars ? text.substr(starts[starts.size() - max_chars]) : text;
  std::string out = starts.size() > max_chars ? "…" : "";
  for (char ch : t) {
    if (ch == '\n') out += "↵";
    else if (ch == '\\') out += "\\\\";
    else if (static_cast<unsigned char>(ch) < 0x20) out += ' ';
    else out += ch;
  }
  return out;
}

// A probability as a person reads it on a drawing: two decimals, three below 0.01, and "<0.001" below that
// (not 4.1e-06: a reader wants to see that it is negligible, not its exponent).
std::string fmt_prob(double p) {
  char buf[32];
  if (p >= 0.01) std::snprintf(buf, sizeof buf, "%.2f", p);
  else if (p >= 0.001) std::snprintf(buf, sizeof buf, "%.3f", p);
  else if (p > 0) return "<0.001";
  else return "0";
  return buf;
}

// A log-probability or a score (negative, any size): two decimals.
std::string fmt_num(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", x);
  return buf;
}

std::string fmt_bytes(double b) {
  char buf[32];
  if (b >= 1 << 30) std::snprintf(buf, sizeof buf, "%.1f GiB", b / (1 << 30));
  else if (b >= 1 << 20) std::snprintf(buf, sizeof buf, "%.1f MiB", b / (1 << 20));
  else if (b >= 1 << 10) std::snprintf(buf, sizeof buf, "%.0f KiB", b / (1 << 10));
  else std::snprintf(buf, sizeof buf, "%.0f B", b);
  return buf;
}

// Probability -> colour, from pale grey (unlikely) to deep blue (certain). sqrt spreads the small ones.
std::string prob_colour(double p) {
  const double t = std::sqrt(std::clamp(p, 0.0, 1.0));
  const int r = static_cast<int>(std::lround(0xcc + t * (0x1f - 0xcc)));
  const int g = static_cast<int>(std::lround(0xcc + t * (0x4e - 0xcc)));
  const int b = static_cast<int>(std::lround(0xcc + t * (0x9c - 0xcc)));
  char buf[8];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", r, g, b);
  return buf;
}

std::string penwidth(double p) { return fmt_num(0.6 + 4.4 * std::clamp(p, 0.0, 1.0)); }

// The look both graphs share: Helvetica labels, boxed nodes, a title on top.
void common_style(Graph& G, const std::string& title, const char* edge_fontsize) {
  G.graph_attr("fontname", "Helvetica");
  G.graph_attr("label", title);
  G.graph_attr("labelloc", "t");
  G.node_default("fontname", "Helvetica");
  G.node_default("fontsize", "10");
  G.node_default("shape", "box");
  G.edge_default("fontname", "Helvetica");
  G.edge_default("fontsize", edge_fontsize);
}

void build_beam_tree(Graph& G, const Trace& t, const TreeOptions& opt);

void build_tree(Graph& G, const Trace& t, const TreeOptions& opt) {
  if (!t.steps.empty() && t.steps[0].beams) return build_beam_tree(G, t, opt);
  const int n = static_cast<int>(t.steps.size());
  const int first = std::clamp(opt.first, 0, n);
  const int last = opt.last < 0 ? n : std::clamp(opt.last, first, n);
  G.graph_attr("rankdir", "LR");
  G.graph_attr("nodesep", "0.06");
  G.graph_attr("ranksep", "0.35");
  common_style(G, "glassbox trace " + tail_text(t.path, 60) + ": steps " + std::to_string(first) + "–" +
                      std::to_string(last > first ? last - 1 : first) + ", top-" + std::to_string(opt.top_k) +
                      " alternatives",
               "8");

  // The root: the text the first drawn step continues (prompt, plus any earlier steps' tokens).
  std::string context = t.header.prompt;
  for (int k = 0; k < first; ++k) context += t.steps[k].token_text;
  Agnode_t* prev = G.node("root", {{"label", (first == 0 ? "prompt\\n" : "text so far\\n") + tail_text(context, 40)},
                                   {"style", "filled,rounded"}, {"fillcolor", "#f2f2f2"}, {"class", "root"},
                                   {"group", "main"}});
  // Wrapped: every opt.wrap steps the path goes on in a new row under the last, from a box naming the steps
  // it holds (a long generation was one strip 16,621 px wide). The row heads share the root's rank, kept in
  // order top to bottom by invisible edges (Graphviz draws none of them).
  Agraph_t* heads = opt.wrap > 0 && last - first > opt.wrap ? G.subgraph("row_heads") : nullptr;
  if (heads) {
    agsafeset(heads, c("rank"), c("same"), c(""));
    agsubnode(heads, prev, 1);
  }
  Agnode_t* above = prev;
  const bool stopped = t.complete() && (t.summary->stop_reason == "stop_token" || t.summary->stop_reason == "stop_text");
  for (int k = first; k < last; ++k) {
    if (heads && k > first && (k - first) % opt.wrap == 0) {
      const int end = std::min(last, k + opt.wrap) - 1;
      Agnode_t* head = G.node("row" + std::to_string(k), {{"label", "steps " + std::to_string(k) + "–" + std::to_string(end) +
                                                                       "\\ncontinued from step " + std::to_string(k - 1)},
                                                           {"style", "rounded,dashed"}, {"color", "#9aa3b2"}, {"fontcolor", "#555555"},
                                                           {"class", "row"}},
                              heads);
      G.edge(above, head, {{"style", "invis"}});
      above = head;
      prev = head;
    }
    const TraceStep& s = t.steps[k];
    const std::int32_t chosen = s.token;
    const double p = s.prob;
    const TraceKv& kv = s.kv;
    std::string label = label_text(s.token_text) + "\\np " + fmt_prob(p) + " · step " + std::to_string(k) +
                        (s.forced ? " (forced)" : "") + "\\nKV " + std::to_string(kv.tokens) + "/" +
                        std::to_string(kv.capacity) + " · " + fmt_bytes(static_cast<double>(kv.bytes));
    // A grammar stage's cut: how many candidates it left and how much of the model's mass they hold.
    for (const auto& st : s.stages)
      if (st.name == "grammar") label += "\\ngrammar kept " + std::to_string(st.kept) + " · mass " + fmt_prob(st.mass);
    if (stopped && k == static_cast<int>(t.steps.size()) - 1) label += "\\n(stop)";
    const std::string id = "s" + std::to_string(k);
    Agnode_t* node = G.node(id, {{"label", label}, {"style", "filled,bold"}, {"fillcolor", prob_colour(p)},
                                 {"fontcolor", p > 0.3 ? "white" : "black"}, {"class", "chosen"}, {"group", "main"},
                                 {"tooltip", "step " + std::to_string(k) + ", id " + std::to_string(chosen)}});
    // Alternatives first so that they sit beside the main path, not across it.
    int drawn = 0;
    for (const auto& c : s.top) {
      if (drawn >= opt.top_k) break;
      const std::int32_t cid = c.id;
      if (cid == chosen) continue;
      const double cp = c.prob;
      Agnode_t* alt = G.node(id + "a" + std::to_string(cid),
                             {{"label", label_text(c.text) + "\\np " + fmt_prob(cp)},
                              {"style", "rounded,dashed"}, {"color", prob_colour(cp)}, {"fontcolor", "#555555"},
                              {"class", "alternative"}, {"tooltip", "id " + std::to_string(cid)}});
      G.edge(prev, alt, {{"label", fmt_prob(cp)}, {"penwidth", penwidth(cp)}, {"color", prob_colour(cp)},
                         {"style", "dashed"}, {"weight", "1"}, {"arrowsize", "0.5"}, {"fontcolor", "#777777"}});
      ++drawn;
    }
    G.edge(prev, node, {{"label", fmt_prob(p)}, {"penwidth", penwidth(p)}, {"color", prob_colour(p)},
                        {"weight", "100"}});
    prev = node;
  }
}

// A beam search's trace (step.beams): every beam each step kept, every hypothesis it finished, and up to
// top_k of the candidates it pruned, each joined to the beam it extends; the winner's path in bold.
void build_beam_tree(Graph& G, const Trace& t, const TreeOptions& opt) {
  std::vector<const TraceBeams*> steps;
  for (const auto& s : t.steps) steps.push_back(&*s.beams);
  if (t.summary && t.summary->beam)
    for (const auto& a : t.summary->beam->after) steps.push_back(&a);
  G.graph_attr("rankdir", "LR");
  G.graph_attr("nodesep", "0.06");
  G.graph_attr("ranksep", "0.35");
  const TraceBeamSummary* bs = t.summary && t.summary->beam ? &*t.summary->beam : nullptr;
  common_style(G, "glassbox trace " + tail_text(t.path, 60) + ": beam search, width " + std::to_string(steps.empty() ? 0 : steps[0]->width) +
                      (bs ? ", length penalty " + fmt_num(bs->length_penalty) : std::string()) + "; bold: the winner",
               "8");
  G.node("root", {{"label", "prompt\n" + tail_text(t.header.prompt, 40)}, {"style", "filled,rounded"}, {"fillcolor", "#f2f2f2"},
                  {"class", "root"}});
  // The winner's path: at each of its steps, the index of its entry in live (-1: it finished there).
  std::vector<int> path;
  int via = 0;
  for (std::size_t k = 0; k < t.steps.size(); ++k) {
    int found = -1;
    const auto& live = t.steps[k].beams->live;
    for (std::size_t i = 0; i < live.size() && found < 0; ++i)
      if (live[i].parent == via && live[i].token == t.steps[k].token) found = static_cast<int>(i);
    path.push_back(found);
    via = found;
  }
  auto parent_id = [](std::size_t k, int parent) { return k == 0 ? std::string("root") : "b" + std::to_string(k - 1) + "_" + std::to_string(parent); };
  for (std::size_t k = 0; k < steps.size(); ++k) {
    const TraceBeams& b = *steps[k];
    const int path_parent = k == 0 ? 0 : (k - 1 < path.size() ? path[k - 1] : -2);
    auto draw = [&](const TraceBeamEntry& e, const std::string& id, const char* kind, bool on_path) {
      const double p = std::exp(e.logprob);
      std::string label = label_text(e.text) + "\nlog p " + fmt_num(e.logprob) + " · Σ " + fmt_num(e.score);
      if (e.normalized) label += "\nfinished: " + fmt_num(*e.normalized);
      const bool pruned = std::string(kind) == "pruned";
      Agnode_t* n = G.node(id, {{"label", label}, {"class", kind},
                                {"style", pruned ? "rounded,dashed" : on_path ? "filled,bold" : "filled,rounded"},
                                {"fillcolor", on_path ? "#2b6cb0" : e.normalized ? "#fde2b8" : "#e8f0fb"},
                                {"fontcolor", on_path ? "white" : pruned ? "#777777" : "black"},
                                {"tooltip", "step " + std::to_string(k) + ", id " + std::to_string(e.token)}});
      G.edge(G.node(parent_id(k, e.parent), {}), n,
             {{"penwidth", on_path ? "3" : penwidth(p)}, {"color", on_path ? "#2b6cb0" : prob_colour(p)},
              {"style", pruned ? "dashed" : "solid"}, {"weight", on_path ? "100" : "1"}, {"arrowsize", "0.5"}});
    };
    for (std::size_t i = 0; i < b.live.size(); ++i)
      draw(b.live[i], "b" + std::to_string(k) + "_" + std::to_string(i), "live",
           k < path.size() && path[k] == static_cast<int>(i));
    for (std::size_t i = 0; i < b.finished.size(); ++i)
      draw(b.finished[i], "f" + std::to_string(k) + "_" + std::to_string(i), "finished",
           k + 1 == t.steps.size() && path[k] < 0 && b.finished[i].parent == path_parent && b.finished[i].token == t.steps[k].token);
    for (std::size_t i = 0; i < b.pruned.size() && static_cast<int>(i) < opt.top_k; ++i)
      draw(b.pruned[i], "p" + std::to_string(k) + "_" + std::to_string(i), "pruned", false);
  }
}

void build_pipeline(Graph& G, const PipelineDesc& p) {
  // Top to bottom: left to right, a dozen boxes in a row made a 1,865 pt strip, unreadable on a page or a slide.
  G.graph_attr("rankdir", "TB");
  common_style(G, "glassbox pipeline", "9");
  G.graph_attr("nodesep", "0.3");
  G.node_default("style", "rounded,filled");
  G.node_default("fillcolor", "#eef3fb");
  auto box = [](const std::string& title, const PipelineStage& s) {
    std::string l = title + "\\n" + s.name;
    if (!s.params.empty()) l += "\\n" + tail_text(s.params, 48);
    return l;
  };
  Agnode_t* prompt = G.node("prompt", {{"label", "prompt text"}, {"shape", "plaintext"}, {"style", ""}});
  Agnode_t* tok = G.node("tokenize", {{"label", box("TOKENIZE", p.tokenizer)}, {"class", "tokenizer"}});
  Agnode_t* prefill = G.node("prefill", {{"label", "PREFILL\\nforward over every prompt position" +
                                                       (p.model.empty() ? std::string() : "\\n" + tail_text(p.model, 40))},
                                         {"fillcolor", "#dde8f7"}, {"class", "prefill"}});
  Agnode_t* decode = G.node("decode", {{"label", "DECODE\\nforward one token at the next position"},
                                       {"fillcolor", "#dde8f7"}, {"class", "decode"}});
  Agnode_t* attn = G.node("attention", {{"label", box("ATTENTION (K/V cache)", p.attention)}, {"shape", "cylinder"},
                                        {"fillcolor", "#fff4dd"}, {"class", "attention"}});
  Agnode_t* dist = G.node("distribution", {{"label", "softmax → probability distribution"}, {"shape", "box"}, {"style", "dashed"},
                                           {"fillcolor", "white"}});
  G.edge(prompt, tok, {});
  G.edge(tok, prefill, {{"label", "token ids"}});
  G.edge(prefill, dist, {{"label", "logits (last position)"}});
  G.edge(decode, dist, {{"label", "logits"}});
  G.edge(prefill, attn, {{"dir", "both"}, {"style", "dashed"}, {"label", "K/V"}, {"arrowsize", "0.6"}});
  G.edge(decode, attn, {{"dir", "both"}, {"style", "dashed"}, {"label", "K/V"}, {"arrowsize", "0.6"}});
  Agnode_t* last = dist;
  Agraph_t* chain = G.subgraph("cluster_sampler_chain");
  agsafeset(chain, c("label"), c("sampler chain (in order)"), c(""));
  agsafeset(chain, c("style"), c("rounded,dashed"), c(""));
  agsafeset(chain, c("color"), c("#2f8a4c"), c(""));
  for (std::size_t i = 0; i < p.samplers.size(); ++i) {
    const auto& s = p.samplers[i];
    Agnode_t* n = G.node("sampler" + std::to_string(i), {{"label", box("SAMPLER " + std::to_string(i + 1), s)},
                                                         {"fillcolor", "#e6f4e6"}, {"class", "sampler"}}, chain);
    G.edge(last, n, {});
    last = n;
  }
  Agnode_t* detok = G.node("detokenize", {{"label", box("DETOKENIZE + STREAM", p.tokenizer)}, {"class", "detokenize"}});
  Agnode_t* out = G.node("text", {{"label", "text (stdout)"}, {"shape", "plaintext"}, {"style", ""}});
  Agnode_t* stop = G.node("stop", {{"label", "stop\\nEOS/BOS · max_tokens · context full"}, {"shape", "plaintext"},
                                   {"style", ""}});
  G.edge(last, detok, {{"label", "chosen token"}});
  G.edge(detok, out, {});
  G.edge(detok, decode, {{"label", "feed back (decode loop)"}, {"constraint", "false"}, {"color", "#1f4e9c"}});
  G.edge(detok, stop, {{"style", "dotted"}});
}

}  // namespace

void check_render_format(const std::string& format) {
  if (format != "svg" && format != "png" && format != "dot")
    throw ConfigError("render format '" + format + "' (expected svg, png or dot)");
}

void parse_step_range(const std::string& text, TreeOptions& opt) {
  const auto colon = text.find(':');
  auto parse = [&](const std::string& s, int dflt) {
    if (s.empty()) return dflt;
    char* end = nullptr;
    const long v = std::strtol(s.c_str(), &end, 10);
    if (*end || v < 0 || v > 1'000'000'000)
      throw ConfigError("--steps '" + text + "': expected A:B with step numbers A < B (A or B may be left out)");
    return static_cast<int>(v);
  };
  if (colon == std::string::npos) {  // one step
    opt.first = parse(text, 0);
    opt.last = opt.first + 1;
    if (text.empty()) throw ConfigError("--steps '': expected A:B");
    return;
  }
  opt.first = parse(text.substr(0, colon), 0);
  opt.last = parse(text.substr(colon + 1), -1);
  if (opt.last >= 0 && opt.last <= opt.first)
    throw ConfigError("--steps '" + text + "': the range [A, B) is empty (expected A < B)");
}

std::string tree_dot(const Trace& t, const TreeOptions& opt) {
  Graph g("glassbox_trace");
  build_tree(g, t, opt);
  return g.dot();
}

void render_tree(const Trace& t, const TreeOptions& opt, const std::string& format, const std::string& out_path) {
  check_render_format(format);
  if (opt.top_k < 0) throw ConfigError("--top must be >= 0");
  if (opt.first > static_cast<int>(t.steps.size()))
    throw ConfigError("--steps starts at step " + std::to_string(opt.first) + " but " + t.path + " has " +
                      std::to_string(t.steps.size()) + " steps");
  // Graphviz's dot layout grows faster than linearly (300 steps take about a second of CPU, 1,000 twenty):
  // a laid-out drawing is limited; the DOT source is not laid out and has no limit.
  const int n = static_cast<int>(t.steps.size());
  const int first = std::clamp(opt.first, 0, n), last = opt.last < 0 ? n : std::clamp(opt.last, first, n);
  if (format != "dot" && last - first > kMaxDrawnSteps)
    throw ConfigError(t.path + ": " + std::to_string(last - first) + " steps to draw, more than " + std::to_string(kMaxDrawnSteps) +
                      " can be laid out in reasonable time: draw a window with --steps A:B (e.g. --steps 0:" +
                      std::to_string(kMaxDrawnSteps) + "), or write --to dot");
  Graph g("glassbox_trace");
  build_tree(g, t, opt);
  g.render(format, out_path);
}

std::string pipeline_dot(const PipelineDesc& p) {
  Graph g("glassbox_pipeline");
  build_pipeline(g, p);
  return g.dot();
}

void render_pipeline(const PipelineDesc& p, const std::string& format, const std::string& out_path) {
  check_render_format(format);
  Graph g("glassbox_pipeline");
  build_pipeline(g, p);
  g.render(format, out_path);
}

}  // namespace glassbox::traces
