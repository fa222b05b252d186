// `glassbox explain`: the sampler playground. A distribution you type, the chain you name, and
// the table the lesson draws: the distribution before and after each stage, with bars, then
// the draw (and, with --samples, how often N draws picked each token). No model involved.
#include <charconv>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "seed_option.hpp"
#include "glassbox/error.hpp"
#include "glassbox/pipeline.hpp"
#include "glassbox/registry.hpp"
#include "glassbox/sampling.hpp"
#include "glassbox/traces/writer.hpp"
#include "session.hpp"

namespace glassbox::cli {

namespace {

using nlohmann::json;

std::string trim(std::string s) {
  s.erase(0, s.find_first_not_of(" \t"));
  s.erase(s.find_last_not_of(" \t") + 1);
  return s;
}

struct Entry {
  std::string text;
  double given = 0;  // as typed
  double prob = 0;   // normalised
  float logit = 0;   // log(prob), -inf for 0
};

// "sunny=.45,cloudy=.25" or ".1,.2,.3,.4" (entries named by their index) -> entries.
std::vector<Entry> parse_dist(const std::string& text, double& sum) {
  auto bad = [&](const std::string& why) {
    return ConfigError("--dist '" + text + "': " + why +
                       " (expected NAME=PROB,NAME=PROB,... or PROB,PROB,..., e.g. sunny=.45,cloudy=.25)");
  };
  std::vector<Entry> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    item = trim(item);
    if (item.empty()) throw bad("entry " + std::to_string(out.size() + 1) + " is empty");
    Entry e;
    std::string value = item;
    const auto eq = item.find('=');
    if (eq != std::string::npos) {
      e.text = trim(item.substr(0, eq));
      value = trim(item.substr(eq + 1));
      if (e.text.empty()) throw bad("entry '" + item + "' has no name before '='");
    } else {
      e.text = std::to_string(out.size());
    }
    auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), e.given);
    if (value.empty() || ec != std::errc() || p != value.data() + value.size())
      throw bad("entry '" + item + "': '" + value + "' is not a number");
    if (!std::isfinite(e.given)) throw bad("entry '" + item + "': probability is not finite");
    if (e.given < 0) throw bad("entry '" + item + "': probability is negative");
    for (const auto& o : out)
      if (o.text == e.text) throw bad("token '" + e.text + "' is listed twice");
    out.push_back(e);
  }
  if (out.empty()) throw bad("no entries");
  if (text.back() == ',') throw bad("trailing ','");
  // Normalised through the largest value first: weights near the double's range (1e308 twice) would
  // otherwise sum to inf and every probability become 0.
  double top = 0;
  for (const auto& e : out) top = std::max(top, e.given);
  if (!(top > 0)) throw bad("every probability is 0");
  double scaled = 0;
  for (const auto& e : out) scaled += e.given / top;
  sum = scaled * top;  // as given (may be inf: only printed)
  for (auto& e : out) {
    e.prob = e.given / top / scaled;
    e.logit = e.prob > 0 ? static_cast<float>(std::log(e.prob)) : -INFINITY;
  }
  return out;
}

json params_json(const Params& p) {
  json o = json::object();
  for (const auto& kv : p.values())  // (no structured binding: clang 14 cannot capture one)
    std::visit([&](const auto& x) { o[kv.first] = x; }, kv.second);
  return o;
}

std::string stage_label(const Sampler& s) {
  std::string label = s.name();
  if (!s.params().values().empty()) label += "(" + s.params().to_string() + ")";
  return label;
}

// A bar of `width` cells for probability p, in eighths of a cell.
std::string bar(double p, int width) {
  static const char* eighths[] = {"", "▏", "▎", "▍", "▌", "▋", "▊", "▉"};
  const int units = static_cast<int>(std::lround(std::clamp(p, 0.0, 1.0) * width * 8));
  std::string s;
  for (int i = 0; i < units / 8; ++i) s += "█";
  s += eighths[units % 8];
  return s;
}

// Display width of UTF-8 text (code points; good enough for names and bars).
std::size_t cells(const std::string& s) {
  std::size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// The entries of --dist as a vocabulary, for stages that read token texts (dry's sequence breakers):
// token i's text is its name; text is encoded by the longest name that matches at each place
// (characters no name starts with are skipped).
class EntryVocab final : public Tokenizer {
 public:
  explicit EntryVocab(const std::vector<Entry>& e) {
    for (const auto& x : e) names_.push_back(x.text);
  }
  std::vector<std::int32_t> encode(std::string_view text, const EncodeOptions&) const override {
    std::vector<std::int32_t> out;
    for (std::size_t i = 0; i < text.size();) {
      std::int32_t best = -1;
      for (std::size_t id = 0; id < names_.size(); ++id)
        if (text.substr(i).starts_with(names_[id]) && (best < 0 || names_[id].size() > names_[best].size()))
          best = static_cast<std::int32_t>(id);
      if (best < 0) {
        ++i;
        continue;
      }
      out.push_back(best);
      i += names_[best].size();
    }
    return out;
  }
  std::string_view decode(std::int32_t, std::int32_t id) const override { return piece(id); }
  std::string_view piece(std::int32_t id) const override {
    return id >= 0 && id < vocab_size() ? std::string_view(names_[id]) : std::string_view();
  }
  std::int32_t vocab_size() const override { return static_cast<std::int32_t>(names_.size()); }
  std::int32_t bos_id() const override { return -1; }
  std::int32_t eos_id() const override { return -1; }

 private:
  std::vector<std::string> names_;
};

std::string pad(const std::string& s, std::size_t w) { return s + std::string(w > cells(s) ? w - cells(s) : 0, ' '); }

std::string fixed(double x, int digits) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(digits) << x;
  return os.str();
}

struct ExplainOpts {
  std::string dist, sampler = "default", history;
  std::vector<std::string> plugin_path;
  long long samples = 0;
  std::uint64_t seed = 0;
  bool json = false;
  int width = 20;
};

// One step of the chain over the given distribution, recorded in full (every candidate), and the further
// draws (--samples), unrecorded.
struct Explained {
  std::vector<Entry> entries;
  double given_sum = 0;
  std::vector<std::int32_t> history;
  std::vector<std::string> warnings;
  bool dist_appended = false;  // the chain's last stage did not select: dist was appended
  std::unique_ptr<EntryVocab> vocab;    // (outlives the chain bound to it)
  std::unique_ptr<SamplerChain> chain;
  std::vector<StageRecord> records;
  std::int32_t selected = -1;
  float u = -1, chosen_p = 0;
  std::vector<long long> counts;  // per entry, with --samples
};

Explained explain(const ExplainOpts& o, const Registry& reg) {
  Explained x;
  x.entries = parse_dist(o.dist, x.given_sum);
  const int n = static_cast<int>(x.entries.size());
  auto index_of = [&](const std::string& t) -> int {
    for (int i = 0; i < n; ++i)
      if (x.entries[i].text == t) return i;
    int id = -1;
    auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), id);
    if (ec == std::errc() && p == t.data() + t.size() && id >= 0 && id < n) return id;
    throw ConfigError("--history: '" + t + "' is neither a token of --dist nor an index 0.." + std::to_string(n - 1));
  };
  if (!trim(o.history).empty()) {
    std::stringstream ss(o.history);
    std::string t;
    while (std::getline(ss, t, ',')) x.history.push_back(index_of(trim(t)));
  }
  const auto specs = parse_plugin_chain(o.sampler, "sampler");
  auto stages = build_sampler_stages(reg, specs, x.warnings);
  for (const auto& w : x.warnings) warn(w);
  std::size_t n_named = 0;  // stages the user named, with "default" expanded
  for (const auto& sp : specs)
    n_named += sp.name == "default" && sp.params.empty() ? parse_plugin_chain(kDefaultSamplerChain, "sampler").size() : 1;
  x.dist_appended = stages.size() > n_named;

  x.chain = std::make_unique<SamplerChain>(std::move(stages), n, o.seed);
  x.vocab = std::make_unique<EntryVocab>(x.entries);
  x.chain->bind(*x.vocab);
  for (auto id : x.history) x.chain->accept(id);
  std::vector<float> logits(n);
  for (int i = 0; i < n; ++i) logits[i] = x.entries[i].logit;

  StageRecorder recorder(*x.chain, n, n);
  const SampleResult pick = x.chain->sample(logits, &recorder);
  x.selected = pick.id;
  x.u = pick.draw_u;
  x.chosen_p = recorder.chosen_prob();
  x.records.assign(recorder.records().begin(), recorder.records().end());
  x.counts.assign(n, 0);
  if (o.samples > 0) {
    ++x.counts[x.selected];
    for (long long i = 1; i < o.samples; ++i) ++x.counts[x.chain->sample(logits).id];
  }
  return x;
}

void print_json(const Explained& x, const ExplainOpts& o) {
  const int n = static_cast<int>(x.entries.size());
  const auto& entries = x.entries;
  const auto& records = x.records;
  const SamplerChain& chain = *x.chain;
  const std::int32_t selected = x.selected;
  json j;
  json toks = json::array();
  for (int i = 0; i < n; ++i)
    toks.push_back({{"id", i}, {"text", entries[i].text}, {"prob", entries[i].prob},
                    {"logit", std::isinf(entries[i].logit) ? json(nullptr) : json(traces::json_float(entries[i].logit))}});
  j["tokens"] = toks;
  j["input_sum"] = x.given_sum;
  j["history"] = x.history;
  json chain_j = json::array();
  for (const auto& st : chain.stages()) chain_j.push_back({{"name", st->name()}, {"params", params_json(st->params())}});
  j["chain"] = chain_j;
  j["dist_appended"] = x.dist_appended;
  json st_j = json::array();
  for (const auto& r : records) {
    json probs = json::array();
    for (const auto& t : r.top)
      probs.push_back({{"id", t.id}, {"text", entries[t.id].text}, {"prob", traces::json_float(t.prob)}});
    st_j.push_back({{"name", r.name}, {"params", r.params ? params_json(*r.params) : json::object()},
                    {"kept", r.kept}, {"mass", traces::json_float(r.mass)},
                    {"entropy", traces::json_float(r.entropy)}, {"probs", probs}});
    if (r.u >= 0) st_j.back()["u"] = traces::json_float(r.u);  // a non-selecting stage's draw (xtc)
  }
  j["stages"] = st_j;
  j["draw"] = {{"seed", o.seed}, {"u", x.u < 0 ? json(nullptr) : json(traces::json_float(x.u))},
               {"selected", selected}, {"text", entries[selected].text}, {"prob", traces::json_float(x.chosen_p)}};
  if (o.samples > 0) {
    json c = json::array();
    for (int i = 0; i < n; ++i)
      c.push_back({{"id", i}, {"text", entries[i].text}, {"count", x.counts[i]},
                   {"freq", static_cast<double>(x.counts[i]) / o.samples}});
    j["samples"] = {{"n", o.samples}, {"seed", o.seed}, {"counts", c}};
  }
  j["warnings"] = x.warnings;
  std::cout << traces::dump(j) << "\n";
}


void print_table(const Explained& x, const ExplainOpts& o, const Registry& reg) {
  const int n = static_cast<int>(x.entries.size());
  const auto& entries = x.entries;
  const auto& records = x.records;
  const SamplerChain& chain = *x.chain;
  const std::int32_t selected = x.selected;
  // prob of each entry after stage s (NaN: removed)
  auto after = [&](const StageRecord& r) {
    std::vector<double> p(n, NAN);
    for (const auto& t : r.top) p[t.id] = t.prob;
    return p;
  };
    // ---- the table: one row per token, one column per stage that reshapes the distribution ----
    struct Column {
      std::string title;
      std::vector<double> p;
      int kept;
      double mass, entropy;
    };
    std::vector<Column> cols;
    {
      Column in{"input", {}, n, 1.0, 0};
      for (const auto& e : entries) {
        in.p.push_back(e.prob);
        if (e.prob > 0) in.entropy -= e.prob * std::log(e.prob);
      }
      cols.push_back(in);
    }
    std::string selector;
    for (std::size_t s = 0; s < records.size(); ++s) {
      const auto& st = *chain.stages()[s];
      if (st.selection() == Selection::Argmax || st.selection() == Selection::Draw) {  // they choose; they do not reshape
        selector = st.name();
        continue;
      }
      if (st.selects()) selector = st.name();
      // Column title NAME:MAIN-VALUE, as one would type it (the chain line shows every parameter).
      std::string title = st.name();
      if (const auto* e = reg.find(PluginKind::Sampler, st.name()); e && !e->info.main_param.empty() &&
                                                                  st.params().has(e->info.main_param))
        title += ":" + format_param_value(st.params().values().at(e->info.main_param));
      cols.push_back({title, after(records[s]), records[s].kept, records[s].mass, records[s].entropy});
    }
    const std::size_t name_w = std::max<std::size_t>(8, [&] {  // 8: "entropy" and a space
      std::size_t w = 0;
      for (const auto& e : entries) w = std::max(w, cells(e.text));
      return w;
    }() + 2);
    const std::size_t col_w = std::max<std::size_t>(8 + o.width, 0);
    std::vector<std::size_t> widths;
    for (const auto& c : cols) widths.push_back(std::max(col_w, cells(c.title) + 2));
    const bool show_samples = o.samples > 0;
    const std::string samples_title = std::to_string(o.samples) + " draws";

    std::ostringstream out;
    std::string chain_text;
    for (const auto& st : chain.stages()) chain_text += (chain_text.empty() ? "" : " → ") + stage_label(*st);
    out << "chain: " << chain_text << (x.dist_appended ? "   (dist appended: the last stage did not select)" : "") << "\n";
    if (std::fabs(x.given_sum - 1.0) > 1e-6) out << "note: the probabilities given sum to " << x.given_sum << "; normalised\n";
    if (!x.history.empty()) {
      out << "history:";
      for (auto id : x.history) out << " " << entries[id].text;
      out << "\n";
    }
    {
      std::string head = pad("token", name_w);
      for (std::size_t c = 0; c < cols.size(); ++c) head += pad(cols[c].title, widths[c]);
      if (show_samples) head += samples_title;
      while (!head.empty() && head.back() == ' ') head.pop_back();
      out << "\n" << head << "\n";
    }
    for (int i = 0; i < n; ++i) {
      std::string row = pad(entries[i].text, name_w);
      for (std::size_t c = 0; c < cols.size(); ++c) {
        const double p = cols[c].p[i];
        row += pad(std::isnan(p) ? "  —" : fixed(p, 4) + " " + bar(p, o.width), widths[c]);
      }
      if (show_samples) {
        const double f = static_cast<double>(x.counts[i]) / o.samples;
        row += fixed(f, 4) + " " + bar(f, o.width);
      }
      while (!row.empty() && row.back() == ' ') row.pop_back();
      out << row << (i == selected ? "   ← chosen" : "") << "\n";
    }
    auto summary_row = [&](const std::string& label, auto value) {
      std::string row = pad(label, name_w);
      for (std::size_t c = 0; c < cols.size(); ++c) row += pad(value(cols[c]), widths[c]);
      while (!row.empty() && row.back() == ' ') row.pop_back();
      out << row << "\n";
    };
    summary_row("kept", [](const Column& c) { return std::to_string(c.kept); });
    summary_row("mass", [](const Column& c) { return fixed(c.mass, 4); });
    summary_row("entropy", [](const Column& c) { return fixed(c.entropy, 4) + " nats"; });
    out << "\n";
    for (const auto& r : records)
      if (r.u >= 0)
        out << r.name << " drew u = " << fixed(r.u, 6) << " from the run's generator"
            << (r.name == "xtc" && r.params && r.params->has("probability")
                    ? (r.u <= r.params->get_float("probability") ? " (<= probability: it acted)" : " (> probability: it did not act)")
                    : "")
            << "\n";
    if (selector == "greedy") {
      out << "greedy picks the most likely token: " << entries[selected].text << " (p = " << fixed(x.chosen_p, 4) << ")\n";
    } else {
      out << selector << " draws with seed " << o.seed << ": u = " << fixed(x.u, 6) << " → " << entries[selected].text
          << " (p = " << fixed(x.chosen_p, 4) << ": the first token, most likely first, whose cumulative p exceeds u)\n";
    }
    for (std::size_t s = records.size(); s < chain.stages().size(); ++s)
      out << chain.stages()[s]->name() << ": not run (a stage before it already chose the token)\n";
    if (show_samples)
      out << samples_title << " with seed " << o.seed << " (the first is the draw above; drawn tokens are not fed back)\n";
  std::cout << out.str();
}

}  // namespace

void add_explain_command(CLI::App& app) {
  auto o = std::make_shared<ExplainOpts>();
  auto* cmd = app.add_subcommand(
      "explain", "show how a sampler chain reshapes a distribution you give (no model needed)");
  cmd->add_option("--dist,-d", o->dist, "the distribution: NAME=PROB,... (e.g. sunny=.45,cloudy=.25,warm=.15,rainy=.10,cold=.05)")
      ->required();
  cmd->add_option("--sampler,-s", o->sampler, "sampler chain, e.g. top-k:3,temperature:0.8 (default: default)");
  cmd->add_option("--history", o->history,
                  "tokens already in the sequence (names or indices, comma-separated), for penalties");
  cmd->add_option("--samples,-N", o->samples, "also draw N tokens and show how often each came up");
  cmd->add_option("--seed", o->seed, "seed of the draws (default: 0)")->check(seed_range());
  cmd->add_option("--width", o->width, "bar width for probability 1 (default: 20)")->check(CLI::Range(1, 200));
  cmd->add_flag("--json", o->json, "print the same data as JSON");
  cmd->add_option("--plugin-path", o->plugin_path, "extra folder of plugin modules (repeatable)");
  cmd->callback([o] {
    if (o->samples < 0) throw ConfigError("--samples = " + std::to_string(o->samples) + " (expected N >= 0)");
    Registry reg;
    reg.load_default(std::vector<std::filesystem::path>(o->plugin_path.begin(), o->plugin_path.end()));
    for (const auto& r : reg.rejections()) warn("module rejected: " + r.to_string());
    const Explained x = explain(*o, reg);
    if (o->json) print_json(x, *o);
    else print_table(x, *o, reg);
  });
}

}  // namespace glassbox::cli
