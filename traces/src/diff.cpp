// trace diff: tokens, then the raw distribution (top-K logprobs, KL, every logit), then each sampler stage.
#include "glassbox/traces/diff.hpp"
#include "glassbox/traces/token_text.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <map>
#include <optional>
#include <sstream>

#include "glassbox/error.hpp"

namespace glassbox::traces {

namespace {

constexpr double kTinyLogprob = -103.28;  // log of the smallest float > 0: stands in for log(0)

std::string num(double x, int prec = 3) {
  std::ostringstream s;
  s << std::setprecision(prec) << x;
  return s.str();
}

// One side's distribution at one step, as far as the trace tells it.
struct Dist {
  std::map<std::int32_t, double> lp;     // id -> logprob, for the listed (or all) candidates
  std::map<std::int32_t, double> logit;  // id -> logit, where known
  std::vector<std::int32_t> order;       // listed ids, most likely first (top-K)
  double floor = 0;                      // every unlisted id has logprob <= floor
  bool everything = false;               // lp holds every candidate (full logits, or a stage's complete list)

  std::optional<double> logprob(std::int32_t id) const {
    auto it = lp.find(id);
    if (it != lp.end()) return it->second;
    if (everything) return kTinyLogprob;  // not a candidate at all: probability 0
    return std::nullopt;
  }
  int rank(std::int32_t id) const {  // 1-based within the listed top-K, 0 when not listed
    auto it = std::find(order.begin(), order.end(), id);
    return it == order.end() ? 0 : static_cast<int>(it - order.begin()) + 1;
  }
};

// The raw model distribution: from every logit when `use_logits`, else from the top-K list.
Dist raw_dist(const TraceStep& step, int k, bool use_logits) {
  Dist d;
  const auto& top = step.top;
  const int n = std::min<int>(k, static_cast<int>(top.size()));
  if (use_logits) {
    const std::vector<double>& x = step.logits;
    double mx = -HUGE_VAL;
    for (double v : x) mx = std::max(mx, v);
    double s = 0;
    for (double v : x) s += std::exp(v - mx);
    const double lse = mx + std::log(s);
    for (std::size_t i = 0; i < x.size(); ++i) {
      d.lp[static_cast<std::int32_t>(i)] = x[i] - lse;
      d.logit[static_cast<std::int32_t>(i)] = x[i];
    }
    d.everything = true;
    for (int i = 0; i < n; ++i) d.order.push_back(top[i].id);
    return d;
  }
  if (n == 0) return d;
  const double p0 = top[0].prob;
  const double lse = top[0].logit.value_or(0) - std::log(std::max(p0, 1e-45));
  for (int i = 0; i < n; ++i) {
    const auto id = top[i].id;
    const double l = top[i].logit.value_or(0);  // the schema requires it on the raw distribution
    d.lp[id] = l - lse;
    d.logit[id] = l;
    d.order.push_back(id);
    d.floor = l - lse;
  }
  return d;
}

// The distribution after one sampler stage (probabilities only). `kept` tells whether the list is complete.
Dist stage_dist(const TraceStage& stage, int k) {
  Dist d;
  const auto& top = stage.top;
  const int n = std::min<int>(k, static_cast<int>(top.size()));
  for (int i = 0; i < n; ++i) {
    const auto id = top[i].id;
    const double lp = std::log(std::max(top[i].prob, 1e-45));
    d.lp[id] = lp;
    d.order.push_back(id);
    d.floor = lp;
  }
  d.everything = n == static_cast<int>(top.size()) && stage.kept == n;
  return d;
}

struct Delta {
  double max = 0;
  std::int32_t id = -1;
  bool bound = false;
  double worst_ratio = 0;  // max Δ / tolerance
  std::int32_t worst_id = -1;
  double worst_d = 0, worst_tol = 0;
};

// max |Δlogprob| over the union of both top-K lists. Where one side does not list a candidate, its logprob
// is only known to be <= its floor: the difference counts as (other - floor) when that is positive.
Delta delta_logprob(const Dist& g, const Dist& n, const DiffOptions& opt, const std::vector<std::int32_t>& skip = {}) {
  Delta r;
  std::vector<std::int32_t> ids = g.order;
  for (auto id : n.order)
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  for (auto id : ids) {
    if (std::find(skip.begin(), skip.end(), id) != skip.end()) continue;
    const auto a = g.logprob(id), b = n.logprob(id);
    double d = 0, ref = 0;
    bool bound = false;
    if (a && b) {
      d = std::abs(*a - *b);
      ref = *a;
    } else if (a) {
      d = std::max(0.0, *a - n.floor);
      ref = *a;
      bound = true;
    } else if (b) {
      d = std::max(0.0, *b - g.floor);
      ref = *b;
      bound = true;
    }
    if (d > r.max) r.max = d, r.id = id, r.bound = bound;
    const double tol = opt.atol + opt.rtol * std::abs(ref);
    if (d / tol > r.worst_ratio) r.worst_ratio = d / tol, r.worst_id = id, r.worst_d = d, r.worst_tol = tol;
  }
  return r;
}

// Candidates a stage kept on one side and removed on the other: listed with p > 0 on one side, absent from
// the other side's complete list. Their |Δlogprob| would read as ~100 (log of nothing); they are "cut".
struct Cut {
  std::int32_t id;
  bool in_golden;  // kept by golden, cut by new (else the reverse)
  double p;        // its probability where it was kept
};
std::vector<Cut> find_cuts(const Dist& g, const Dist& n) {
  std::vector<Cut> out;
  for (auto id : g.order)
    if (n.everything && !n.lp.count(id) && g.lp.at(id) > kTinyLogprob) out.push_back({id, true, std::exp(g.lp.at(id))});
  for (auto id : n.order)
    if (g.everything && !g.lp.count(id) && n.lp.at(id) > kTinyLogprob) out.push_back({id, false, std::exp(n.lp.at(id))});
  return out;
}

// max |Δlogit| over the ids whose logit both sides know (every id with full logits).
Delta delta_logit(const Dist& g, const Dist& n, const DiffOptions& opt) {
  Delta r;
  for (const auto& [id, a] : g.logit) {
    auto it = n.logit.find(id);
    if (it == n.logit.end()) continue;
    const double d = std::abs(a - it->second);
    if (d > r.max) r.max = d, r.id = id;
    const double tol = opt.atol + opt.rtol * std::abs(a);
    if (d / tol > r.worst_ratio) r.worst_ratio = d / tol, r.worst_id = id, r.worst_d = d, r.worst_tol = tol;
  }
  return r;
}

// KL(golden || new). Exact over the vocabulary when both know everything; otherwise the KL between the
// two distributions coarsened to {golden's top-K ids, everything else}, a lower bound of the true KL.
double kl_divergence(const Dist& g, const Dist& n, bool& exact) {
  exact = g.everything && n.everything;
  double kl = 0;
  if (exact) {
    for (const auto& [id, a] : g.lp) {
      const double p = std::exp(a);
      if (p > 0) kl += p * (a - *n.logprob(id));
    }
    return std::max(0.0, kl);
  }
  double pg_rest = 1, pn_rest = 1;
  for (auto id : g.order) {
    const double a = *g.logprob(id);
    const double b = n.logprob(id).value_or(std::min(n.floor, a));  // unlisted: at most the floor
    const double p = std::exp(a);
    kl += p * (a - b);
    pg_rest -= p;
    pn_rest -= std::exp(b);
  }
  if (pg_rest > 1e-12 && pn_rest > 1e-12) kl += pg_rest * std::log(pg_rest / pn_rest);
  return std::max(0.0, kl);
}

// A token as `"text" (id)`, its text found in the step's lists (or the other side's step), else "id N".
std::string token_desc(const TraceStep& step, std::int32_t id, const TraceStep* other = nullptr) {
  for (const TraceStep* s : {&step, other}) {
    if (!s) continue;
    for (const auto& t : s->top)
      if (t.id == id) return show_text(t.text) + " (" + std::to_string(id) + ")";
    if (s->token == id) return show_text(s->token_text) + " (" + std::to_string(id) + ")";
  }
  return "id " + std::to_string(id);
}

// ---- partial distributions (imported traces): what each side knows, compared over the union ----

// One side's distribution at a step as far as it is known: exact log-probabilities of some ids, and
// whether those are all (a complete softmax, or a stage's whole list). Every id it does not know shares
// the rest of the mass, 1 - sum of the known.
struct Known {
  std::map<std::int32_t, double> lp;  // id -> logprob (-inf: known to be 0)
  bool complete = false;              // unknown ids have probability 0
  std::vector<std::int32_t> listed;   // the list as the side shows it (membership), most likely first
};

bool unreported(const TraceStep& s) { return s.unlisted && *s.unlisted >= 1 - 1e-12 && s.top.empty(); }

// The raw distribution: every logit when the step has them, else the listed candidates (and the chosen
// token's own logprob, which llama.cpp gives even when it is not listed).
Known known_raw(const TraceStep& s, bool use_logits) {
  Known k;
  for (const auto& t : s.top) k.listed.push_back(t.id);
  if (use_logits && !s.logits.empty()) {
    double mx = -HUGE_VAL, z = 0;
    for (double v : s.logits) mx = std::max(mx, v);
    for (double v : s.logits) z += std::exp(v - mx);
    const double lse = mx + std::log(z);
    for (std::size_t i = 0; i < s.logits.size(); ++i) k.lp[static_cast<std::int32_t>(i)] = s.logits[i] - lse;
    k.complete = true;
    return k;
  }
  if (!s.top.empty()) {
    const double lse = s.top[0].logit.value_or(0) - std::log(std::max(s.top[0].prob, 1e-300));
    for (const auto& t : s.top) k.lp[t.id] = t.logit.value_or(0) - lse;
  }
  if (!k.lp.count(s.token) && s.prob > 0) k.lp[s.token] = s.logprob;
  return k;
}

// After the sampler chain: an imported post-sampling step's list, or glassbox's last stage.
Known known_post(const TraceStep& s, bool imported) {
  Known k;
  if (imported) {
    for (const auto& t : s.top) k.lp[t.id] = std::log(std::max(t.prob, 1e-300)), k.listed.push_back(t.id);
    if (!k.lp.count(s.token) && s.prob > 0) k.lp[s.token] = std::log(s.prob);
    return k;
  }
  if (!s.draw.u) {
    // An argmax chain (greedy): after it only the pick is left, with probability 1 (what llama.cpp reports
    // for temperature 0: the argmax 1.0, the other survivors 0).
    k.lp[s.draw.selected] = 0;
    k.listed.push_back(s.draw.selected);
    k.complete = true;
    return k;
  }
  if (s.stages.empty()) return known_raw(s, false);
  const TraceStage& st = s.stages.back();
  for (const auto& t : st.top) k.lp[t.id] = t.prob > 0 ? std::log(t.prob) : -HUGE_VAL, k.listed.push_back(t.id);
  k.complete = st.kept == static_cast<int>(st.top.size());
  return k;
}

// The ids both sides know a probability for.
std::vector<std::int32_t> shared_ids(const Known& a, const Known& b) {
  std::vector<std::int32_t> out;
  for (const auto& [id, v] : a.lp)
    if (b.lp.count(id) || b.complete) out.push_back(id);
  for (const auto& [id, v] : b.lp)
    if (!a.lp.count(id) && a.complete) out.push_back(id);
  return out;
}
double lp_of(const Known& k, std::int32_t id) {
  auto it = k.lp.find(id);
  return it != k.lp.end() ? it->second : -HUGE_VAL;  // only asked for ids it knows (or a complete side's zeros)
}

// KL(a || b) over the partition {each shared id, everything else}: exact where both sides are complete,
// otherwise a lower bound of the true KL (coarsening never increases it), and finite: the rest of the mass
// is one bucket on each side. A shared id with p > 0 on a and 0 on b counts with p_b = 1e-12.
double kl_partition(const Known& a, const Known& b, const std::vector<std::int32_t>& ids) {
  constexpr double kFloor = 1e-12;
  double kl = 0, sa = 0, sb = 0;
  for (auto id : ids) {
    const double pa = std::exp(lp_of(a, id)), pb = std::exp(lp_of(b, id));
    sa += pa, sb += pb;
    if (pa > 0) kl += pa * (std::log(pa) - std::log(std::max(pb, kFloor)));
  }
  const double ra = std::max(0.0, 1 - sa), rb = std::max(0.0, 1 - sb);
  if (ra > 1e-9) kl += ra * (std::log(ra) - std::log(std::max(rb, kFloor)));
  return std::max(0.0, kl);
}

// NMSE of two logit vectors after removing each one's mean (logits are defined up to a constant):
// sum((a - b)^2) / sum(a^2), the measure of llama.cpp's test-backend-ops.
double nmse_of(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size() || a.empty()) return -1;
  double ma = 0, mb = 0;
  for (std::size_t i = 0; i < a.size(); ++i) ma += a[i], mb += b[i];
  ma /= a.size(), mb /= b.size();
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double x = a[i] - ma, y = b[i] - mb;
    num += (x - y) * (x - y);
    den += x * x;
  }
  return den > 0 ? num / den : (num > 0 ? HUGE_VAL : 0);
}

int max_top(const Trace& t) {
  std::size_t k = 0;
  for (const auto& s : t.steps) k = std::max(k, s.top.size());
  return static_cast<int>(k);
}

// How a run ended, for the length comparison ("cut short" for a trace read without its summary).
std::string stop_reason(const Trace& t) { return t.summary ? t.summary->stop_reason : std::string("cut short"); }

}  // namespace

std::string show_text(const std::string& text, std::size_t max) {
  // A special token reads as its bare name (</s>, not "\n</s>\n"), unquoted so that it is not taken for text.
  if (std::string name = special_name(text); !name.empty()) return name;
  std::string out = "\"";
  std::size_t chars = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if ((c & 0xC0) != 0x80) ++chars;  // count UTF-8 characters, not bytes
    if (chars > max) {
      out += "…";
      break;
    }
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else if (c == '"') out += "\\\"";
    else if (c == '\\') out += "\\\\";
    else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else out += static_cast<char>(c);
  }
  return out + "\"";
}

int DiffResult::first_divergent_step() const {
  if (first_token_divergence < 0) return first_out_of_tolerance;
  if (first_out_of_tolerance < 0) return first_token_divergence;
  return std::min(first_token_divergence, first_out_of_tolerance);
}

namespace {

// Where each number comes from: docs/golden-traces.md#tolerance-profiles. atol bounds |Δlogprob| (twice the
// logit tolerance of ../shared/gguf/README.md's table: a log-softmax moves by at most twice the largest logit
// change), kl the KL in either direction, nmse the centred logits' NMSE.
const std::vector<std::pair<std::string, DiffOptions>>& profiles() {
  auto p = [](double atol, double kl, double nmse, bool exact) {
    DiffOptions o;
    o.atol = atol, o.rtol = 1e-5, o.kl = kl, o.nmse = nmse, o.tokens_exact = exact;
    return o;
  };
  static const std::vector<std::pair<std::string, DiffOptions>> all = {
      {"f32", p(2e-4, 1e-5, 1e-6, true)},
      {"f16", p(0.04, 1e-3, 1e-4, false)},
      {"q8_0", p(1.0, 0.03, 1e-2, false)},
      {"q4_0", p(1.0, 0.05, 1e-2, false)},
      {"q4_1", p(1.0, 0.05, 1e-2, false)},
      {"q4_k", p(5.0, 0.1, 5e-2, false)},
      {"q5_k", p(5.0, 0.1, 5e-2, false)},
      {"q6_k", p(5.0, 0.1, 5e-2, false)},
      {"llamacpp-server", p(0.01, 1e-4, 1e-5, true)},
      {"openai", p(1.0, 0.1, 1e-1, false)},
  };
  return all;
}

}  // namespace

std::optional<DiffOptions> diff_profile(const std::string& name) {
  for (const auto& [n, o] : profiles())
    if (n == name) {
      DiffOptions x = o;
      x.profile = n;
      return x;
    }
  return std::nullopt;
}

const std::vector<std::string>& diff_profile_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& [n, o] : profiles()) v.push_back(n);
    return v;
  }();
  return names;
}

namespace {

// Each weight type that has a profile of its own, from the tightest profile to the loosest (the profiles'
// atol, kl and nmse do not decrease down the list: test_trace_diff checks it); a mix of types takes the
// profile of the type furthest down. Among equal profiles the order is by bits per weight (Q4_K_M, Q4_K + Q6_K,
// is q4_k).
constexpr std::pair<const char*, const char*> kTypeProfiles[] = {
    {"F32", "f32"},  {"F16", "f16"},  {"Q8_0", "q8_0"}, {"Q4_1", "q4_1"},
    {"Q4_0", "q4_0"}, {"Q6_K", "q6_k"}, {"Q5_K", "q5_k"}, {"Q4_K", "q4_k"},
};

std::string trim(const std::string& s) {
  const auto a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
  return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
}

WeightTypesProfile profile_of_types(std::vector<std::string> types) {
  WeightTypesProfile w;
  w.types = std::move(types);
  int loosest = -1;
  for (const auto& t : w.types) {
    int at = -1;
    for (int i = 0; i < static_cast<int>(std::size(kTypeProfiles)); ++i)
      if (t == kTypeProfiles[i].first) at = i;
    if (at < 0) {
      if (std::find(w.unprofiled.begin(), w.unprofiled.end(), t) == w.unprofiled.end()) w.unprofiled.push_back(t);
    } else {
      loosest = std::max(loosest, at);
    }
  }
  if (loosest >= 0) w.type = kTypeProfiles[loosest].first;
  if (loosest >= 0 && w.unprofiled.empty()) w.profile = kTypeProfiles[loosest].second;
  return w;
}

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (const auto& x : v) out += (out.empty() ? "" : sep) + x;
  return out;
}

}  // namespace

WeightTypesProfile weight_types_profile(const std::string& weight_types) {
  std::vector<std::string> types;
  std::size_t at = 0;
  while (at <= weight_types.size()) {
    const std::size_t end = std::min(weight_types.find(',', at), weight_types.size());
    std::string item = trim(weight_types.substr(at, end - at));
    item = trim(item.substr(0, item.find(':')));
    for (auto& c : item) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (!item.empty() && std::find(types.begin(), types.end(), item) == types.end()) types.push_back(item);
    at = end + 1;
  }
  return profile_of_types(std::move(types));
}

ProfileProposal proposed_profile(const Trace& golden, const Trace& next) {
  ProfileProposal out;
  const std::string where = "docs/golden-traces.md#tolerance-profiles";
  struct Side {
    const char* name;     // "golden", "new"
    const char* subject;  // "the golden's model", ...
    std::string raw;      // its weight_types, as recorded
    WeightTypesProfile w;
  };
  std::vector<Side> sides;  // the sides whose header says what weights the numbers came from
  for (const auto* t : {&golden, &next}) {
    const bool is_golden = t == &golden;
    if (t->header.imported) {
      out.lines.push_back(std::string(is_golden ? "the golden" : "the new trace") + " is another engine's output (" +
                          t->header.imported->dialect + "): its header's weight types are the model given to `trace import`, "
                          "not what the engine ran; use the profile of the engine's weights (a Q8_0 server: --profile q8_0; " +
                          where + ")");
      continue;
    }
    const std::string raw = t->header.model.weight_types.value_or("");
    auto w = weight_types_profile(raw);
    if (w.types.empty()) continue;
    sides.push_back({is_golden ? "golden" : "new", is_golden ? "the golden's model" : "the new trace's model", raw, std::move(w)});
  }
  if (sides.empty()) return out;
  std::vector<std::string> all;
  for (const auto& s : sides)
    for (const auto& t : s.w.types)
      if (std::find(all.begin(), all.end(), t) == all.end()) all.push_back(t);
  const WeightTypesProfile w = profile_of_types(all);
  auto same_types = [](std::vector<std::string> a, std::vector<std::string> b) {
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    return a == b;
  };
  const bool differ = sides.size() == 2 && !same_types(sides[0].w.types, sides[1].w.types);
  std::string whose;  // "the new trace's model has Q4_0 weights (F16:5, ...)" and the like
  if (differ) {
    whose = "the traces' models have different weight types (golden: " + sides[0].raw + "; new: " + sides[1].raw + ")";
  } else {
    const std::string subject = sides.size() == 2 ? "both traces' models have" : std::string(sides[0].subject) + " has";
    whose = subject + " " + (w.type.empty() ? join(w.types, " and ") : w.type) + " weights (" + sides.back().raw + ")";
    if (sides.size() == 1 && !(golden.header.imported || next.header.imported))
      whose += "; the " + std::string(sides[0].name == std::string("golden") ? "new trace's" : "golden's") +
               " header does not record its weight types";
  }
  if (!w.unprofiled.empty()) {
    out.lines.push_back(whose + ": no tolerance profile is measured for " + join(w.unprofiled, ", ") +
                        " weights; give --atol, --kl and --nmse (" + where + ")");
    return out;
  }
  if (w.profile == "f32") return out;  // the defaults are float32's
  out.profile = w.profile;
  const bool mix = w.types.size() > 1;
  out.lines.push_back(whose + ": " + (differ || mix ? "the loosest type, " + w.type + ", gives" : std::string(sides.size() == 2 ? "their profile is" : "its profile is")) +
                      " --profile " + w.profile + "; the default tolerances are float32's (" + where + ")");
  return out;
}

namespace {
// Compares one step where either side was imported from another engine: the distributions over what both
// know (raw, or after the chain for a post-sampling import), KL both ways, NMSE with every logit.
void compare_imported(const TraceStep& g, const TraceStep& x, std::int32_t gp, std::int32_t xp, bool post, bool g_imp, bool x_imp,
                      const DiffOptions& opt, StepDiff& d) {
  if (unreported(g) || unreported(x)) {
    d.reported = false;
    return;
  }
  const bool logits = !g.logits.empty() && !x.logits.empty();
  const Known a = post ? known_post(g, g_imp) : known_raw(g, true);
  const Known b = post ? known_post(x, x_imp) : known_raw(x, true);
  // vLLM's check, on each side's own pick (in a replay the appended tokens are the same by construction)
  d.golden_in_new = gp == xp || std::find(b.listed.begin(), b.listed.end(), gp) != b.listed.end();
  d.new_in_golden = gp == xp || std::find(a.listed.begin(), a.listed.end(), xp) != a.listed.end();
  const auto ids = shared_ids(a, b);
  d.shared = static_cast<int>(ids.size());
  double worst_ratio = 0, worst_d = 0, worst_tol = 0;
  std::int32_t worst_id = -1;
  for (auto id : ids) {
    const double la = lp_of(a, id), lb = lp_of(b, id);
    if (!std::isfinite(la) || !std::isfinite(lb)) continue;  // kept on one side, cut on the other: the KL says how much
    const double dd = std::abs(la - lb);
    if (dd > d.dlogprob) d.dlogprob = dd, d.dlogprob_id = id;
    const double tol = opt.atol + opt.rtol * std::abs(la);
    if (dd / tol > worst_ratio) worst_ratio = dd / tol, worst_d = dd, worst_tol = tol, worst_id = id;
  }
  if (worst_ratio > 1)
    d.failures.push_back(std::string(post ? "after the chain: " : "") + "|Δlogprob| " + num(worst_d) + " > " + num(worst_tol) + " for " +
                         token_desc(g, worst_id, &x));
  d.kl = kl_partition(a, b, ids);
  d.kl_reverse = kl_partition(b, a, ids);
  d.kl_exact = a.complete && b.complete;
  if (d.kl > opt.kl) d.failures.push_back("KL(golden‖new) " + num(d.kl) + " > " + num(opt.kl));
  else if (d.kl_reverse > opt.kl) d.failures.push_back("KL(new‖golden) " + num(d.kl_reverse) + " > " + num(opt.kl));
  if (logits && !post) {
    d.nmse = nmse_of(g.logits, x.logits);
    if (d.nmse > opt.nmse) d.failures.push_back("NMSE of the logits " + num(d.nmse) + " > " + num(opt.nmse));
  }
  d.raw_within = d.failures.empty();
}

}  // namespace

// The headers: what makes the two runs differ (notes), a sampler chain or prompt that makes them not
// comparable (regressions). Sets r.imported and r.compared; true when the prompts encode the same.
bool compare_headers(const Trace& golden, const Trace& next, DiffResult& r) {
  const TraceHeader& gh = golden.header;
  const TraceHeader& nh = next.header;
  const TraceModel& gm = gh.model;
  const TraceModel& nm = nh.model;
  if (gm.sha256 != nm.sha256)
    r.notes.push_back("model files differ: golden " + gm.sha256.substr(0, 12) + "… (" + gm.path + "), new " +
                      nm.sha256.substr(0, 12) + "… (" + nm.path + ")");
  if (gm.config != nm.config)
    r.notes.push_back("model configs differ: " + dump(to_json(gm.config)) + " vs " + dump(to_json(nm.config)));
  if (gh.attention != nh.attention)
    r.notes.push_back("attention differs: golden " + plugin_text(gh.attention) + ", new " + plugin_text(nh.attention));
  if (gh.tokenizer.name != nh.tokenizer.name)
    r.notes.push_back("tokenizer plugins differ: golden " + plugin_text(gh.tokenizer) + ", new " + plugin_text(nh.tokenizer));
  // A seed matters only to a chain that draws: two argmax runs with different seeds are the same computation.
  auto draws = [](const Trace& t) {
    for (const auto& s : t.steps)
      if (s.draw.u) return true;
    return false;
  };
  if (gh.seed != nh.seed && (draws(golden) || draws(next)))
    r.notes.push_back("seeds differ: golden " + std::to_string(gh.seed) + ", new " + std::to_string(nh.seed));
  if (gh.rng != nh.rng) r.notes.push_back("generators differ: golden \"" + gh.rng + "\", new \"" + nh.rng + "\"");
  r.imported = gh.imported || nh.imported;
  const bool post = (gh.imported && gh.imported->distribution == "post") || (nh.imported && nh.imported->distribution == "post");
  r.compared = post ? "post" : "raw";
  for (const Trace* t : {&golden, &next})
    if (t->header.imported)
      r.notes.push_back((t == &golden ? "golden" : "new") + std::string(" is another engine's output: ") + t->header.imported->dialect + " (" +
                        t->header.imported->distribution + " distribution) from " + t->header.imported->file +
                        (t->header.imported->distribution == "post" ? "; compared with the other side's distribution after its sampler chain" : ""));
  if (gh.samplers != nh.samplers) {
    // An imported trace's chain is the one its importer was told the engine ran: worth a note, but the
    // engine's own settings are what they are.
    if (r.imported) r.notes.push_back("sampler chains differ: golden " + golden.sampler_chain() + ", new " + next.sampler_chain());
    else r.regressions.push_back("sampler chain differs: golden " + golden.sampler_chain() + ", new " + next.sampler_chain());
  }
  if (golden.full() != next.full())
    r.notes.push_back("only one trace has every logit: comparing the top-" + std::to_string(r.top_k) + " lists");
  const bool same_prompt = gh.prompt_ids == nh.prompt_ids;
  if (!same_prompt) {
    r.regressions.push_back("prompt encodes differently: golden " + ids_text(gh.prompt_ids) + ", new " +
                            ids_text(nh.prompt_ids) + " (no step is comparable)");
    r.context_divergence = 0;
  } else if (gh.prompt != nh.prompt) {
    r.notes.push_back("prompt texts differ but encode the same");
  }

  return same_prompt;
}

// A step's own distributions, both traces glassbox's: Δlogprob, Δlogit, KL both ways and NMSE of the raw
// distribution, then each sampler stage's cuts, kept counts and Δlogprob (stopping at the first stage that
// differs: later stages start from its output).
void compare_raw(const TraceStep& g, const TraceStep& x, const Dist& gd, const Dist& xd, std::int32_t g_pick, std::int32_t x_pick,
                 const DiffResult& r, const DiffOptions& opt, StepDiff& d) {
  const Delta lp = delta_logprob(gd, xd, opt);
  d.dlogprob = lp.max, d.dlogprob_id = lp.id, d.dlogprob_bound = lp.bound;
  if (lp.worst_ratio > 1)
    d.failures.push_back("|Δlogprob| " + num(lp.worst_d) + " > " + num(lp.worst_tol) + " for " + token_desc(g, lp.worst_id, &x));
  const Delta lg = delta_logit(gd, xd, opt);
  d.dlogit = lg.max, d.dlogit_id = lg.id;
  if (lg.worst_ratio > 1)
    d.failures.push_back("|Δlogit| " + num(lg.worst_d) + " > " + num(lg.worst_tol) + " for " + token_desc(g, lg.worst_id, &x));
  d.kl = kl_divergence(gd, xd, d.kl_exact);
  if (d.kl > opt.kl) d.failures.push_back("KL " + num(d.kl) + " > " + num(opt.kl));
  {
    bool exact_r = false;
    d.kl_reverse = kl_divergence(xd, gd, exact_r);
    if (d.kl <= opt.kl && d.kl_reverse > opt.kl) d.failures.push_back("KL(new‖golden) " + num(d.kl_reverse) + " > " + num(opt.kl));
  }
  if (r.full_logits) {
    d.nmse = nmse_of(g.logits, x.logits);
    if (d.nmse > opt.nmse && opt.profile.size()) d.failures.push_back("NMSE of the logits " + num(d.nmse) + " > " + num(opt.nmse));
  }
  d.golden_in_new = g_pick == x_pick || xd.rank(g_pick) > 0;
  d.new_in_golden = g_pick == x_pick || gd.rank(x_pick) > 0;
  d.shared = static_cast<int>(gd.order.size());

  d.raw_within = d.failures.empty();
  const std::vector<TraceStage>& gs = g.stages;
  const std::vector<TraceStage>& xs = x.stages;
  if (gs.size() != xs.size()) {
    d.failures.push_back("sampler stages ran: golden " + std::to_string(gs.size()) + ", new " + std::to_string(xs.size()));
  } else {
    for (std::size_t i = 0; i < gs.size(); ++i) {
      if (gs[i].name != xs[i].name) {
        d.failures.push_back("stage " + std::to_string(i + 1) + " is " + xs[i].name + ", golden " + gs[i].name);
        continue;
      }
      const std::string& name = gs[i].name;
      const Dist ga = stage_dist(gs[i], r.top_k), xa = stage_dist(xs[i], r.top_k);
      const auto cuts = find_cuts(ga, xa);
      std::vector<std::int32_t> cut_ids;
      const std::size_t before = d.failures.size();
      for (const auto& c : cuts) {
        cut_ids.push_back(c.id);
        d.failures.push_back("stage " + name + " cut " + token_desc(g, c.id, &x) + " in " + (c.in_golden ? "new" : "golden") +
                             " but kept it in " + (c.in_golden ? "golden" : "new") + " (p " + num(c.p) + " there)");
      }
      if (gs[i].kept != xs[i].kept)
        d.failures.push_back("stage " + name + " kept " + std::to_string(xs[i].kept) + " candidates in new, " +
                             std::to_string(gs[i].kept) + " in golden");
      const Delta sd = delta_logprob(ga, xa, opt, cut_ids);
      if (sd.max > d.dstage) d.dstage = sd.max, d.dstage_name = name;
      if (sd.worst_ratio > 1)
        d.failures.push_back("after stage " + name + ": |Δlogprob| " + num(sd.worst_d) + " > " + num(sd.worst_tol) + " for " +
                             token_desc(g, sd.worst_id, &x));
      if (d.failures.size() > before) {
        // Later stages start from this one's output: their differences follow from it, not reported again.
        d.stage_index = static_cast<int>(i);
        break;
      }
    }
  }
}

// The logit lens of both steps, layer by layer.
void compare_lens(const TraceStep& g, const TraceStep& x, int top_k, const DiffOptions& opt, StepDiff& d) {
  if (g.lens && x.lens) {
    auto lens_dist = [&](const TraceLens& l) {
      Dist ld;
      const int n = std::min<int>(top_k, static_cast<int>(l.top.size()));
      for (int i = 0; i < n; ++i) {
        const double lp = std::log(std::max(l.top[i].prob, 1e-45));
        ld.lp[l.top[i].id] = lp;
        ld.order.push_back(l.top[i].id);
        ld.floor = lp;
      }
      return ld;
    };
    for (const auto& gl : *g.lens) {
      const auto xl = std::find_if(x.lens->begin(), x.lens->end(),
                                   [&](const TraceLens& t) { return t.layer == gl.layer && t.attn == gl.attn; });
      if (xl == x.lens->end()) continue;
      const Delta ld = delta_logprob(lens_dist(gl), lens_dist(*xl), opt);
      d.lens.push_back({gl.layer, gl.attn, ld.max});
      if (ld.worst_ratio > 1)
        d.failures.push_back("lens " + std::string(gl.attn ? "inside layer " : "after layer ") + std::to_string(gl.layer) +
                             ": |Δlogprob| " + num(ld.worst_d) + " > " + num(ld.worst_tol) + " for " + token_desc(g, ld.worst_id, &x));
    }
  }
}

// Tokens that differ: a near-tie of an argmax, a choice the profile allows (each in the other's list), or a failure.
void judge_tokens(const TraceStep& g, const TraceStep& x, std::int32_t g_tok, std::int32_t x_tok, std::int32_t g_pick, std::int32_t x_pick,
                  const Dist& xd, const DiffOptions& opt, DiffResult& r, StepDiff& d) {
  const int k = d.step;
  // An argmax between candidates whose logprobs are equal within tolerance may fall either way after a
  // rebuild: with the distributions within tolerance, that is a near-tie, not a regression.
  const auto lg_pick = xd.logprob(g_pick), lx_pick = xd.logprob(x_pick);
  const bool argmax = !g.draw.u && !x.draw.u;
  const bool tie = argmax && d.failures.empty() && g_tok == g_pick && x_tok == x_pick && lg_pick && lx_pick &&
                   std::abs(*lg_pick - *lx_pick) <= opt.atol + opt.rtol * std::abs(*lx_pick);
  const bool members = d.golden_in_new && d.new_in_golden;
  if (!tie && !opt.tokens_exact && members) {
    r.notes.push_back("step " + std::to_string(k) + ": new chose " + token_desc(x, x_pick, &g) + " where the golden chose " +
                      token_desc(g, g_pick, &x) + "; each is in the other's top-N list (profile " + opt.profile + " allows that)");
  } else if (!tie && !members) {
    if (!d.golden_in_new) d.failures.insert(d.failures.begin(), "golden's token " + token_desc(g, g_pick, &x) + " is not in new's top-N list");
    if (!d.new_in_golden) d.failures.insert(d.failures.begin(), "new's token " + token_desc(x, x_pick, &g) + " is not in golden's top-N list");
  }
  if (!tie && !opt.tokens_exact) {
    // judged by membership above
  } else if (tie) {
    r.notes.push_back("step " + std::to_string(k) + ": near-tie: the argmax chose " + token_desc(x, x_pick) +
                      " where the golden chose " + token_desc(g, g_pick) + ", their logprobs differ by " +
                      num(std::abs(*lg_pick - *lx_pick)) + " (within tolerance)");
  } else {
    if (g_pick != x_pick)
      d.failures.insert(d.failures.begin(), "the sampler chose " + token_desc(x, x_pick, &g) + " where the golden chose " +
                                                token_desc(g, g_pick, &x));
    if (g_tok != x_tok && (g_tok != g_pick || x_tok != x_pick))
      d.failures.insert(d.failures.begin(), "appended " + token_desc(x, x_tok) + " where the golden appended " +
                                                token_desc(g, g_tok));
  }
}

DiffResult diff_traces(const Trace& golden, const Trace& next, const DiffOptions& opt) {
  if (opt.atol < 0 || opt.rtol < 0 || opt.kl < 0) throw ConfigError("diff tolerances must be >= 0");
  if (opt.top_k < 0) throw ConfigError("--top must be >= 0");
  const TraceHeader& gh = golden.header;
  const TraceHeader& nh = next.header;
  if (golden.vocab_size() != next.vocab_size())
    throw TraceError(next.path + ": vocabulary of " + std::to_string(next.vocab_size()) + " tokens, but " + golden.path +
                     " has " + std::to_string(golden.vocab_size()) + ": the traces are not comparable");
  DiffResult r;
  r.golden_steps = static_cast<int>(golden.steps.size());
  r.new_steps = static_cast<int>(next.steps.size());
  const int listed = std::min(max_top(golden), max_top(next));
  r.top_k = opt.top_k > 0 ? std::min(opt.top_k, listed) : listed;
  if (opt.top_k > listed)
    r.notes.push_back("--top " + std::to_string(opt.top_k) + " but the traces list " + std::to_string(listed) +
                      " candidates per step: comparing " + std::to_string(listed));
  r.full_logits = golden.full() && next.full();

  const bool same_prompt = compare_headers(golden, next, r);
  const bool post = r.compared == "post";
  // ---- steps, while both sides saw the same context ----
  const int n = same_prompt ? std::min(r.golden_steps, r.new_steps) : 0;
  for (int k = 0; k < n; ++k) {
    const TraceStep& g = golden.steps[k];
    const TraceStep& x = next.steps[k];
    StepDiff d;
    d.step = k;
    const std::int32_t g_tok = g.token, x_tok = x.token;
    // A replay of another engine's sampled run: its draws came from its own generator, which glassbox cannot
    // reproduce, so only the appended (forced) tokens and the distributions are compared, not the picks.
    const bool other_rng = (gh.imported && x.forced && x.draw.u) || (nh.imported && g.forced && g.draw.u);
    const std::int32_t g_pick = other_rng ? g.token : g.draw.selected, x_pick = other_rng ? x.token : x.draw.selected;
    d.tokens_agree = g_tok == x_tok && g_pick == x_pick;
    if (d.tokens_agree) ++r.token_agree;
    else if (r.first_token_divergence < 0) r.first_token_divergence = k;

    if (x.forced && x.token != x.draw.selected && !other_rng && r.history_divergence < 0) r.history_divergence = k + 1;
    const Dist gd = raw_dist(g, r.top_k, r.full_logits);
    const Dist xd = raw_dist(x, r.top_k, r.full_logits);
    if (r.imported) {
      compare_imported(g, x, g_pick, x_pick, post, gh.imported.has_value(), nh.imported.has_value(), opt, d);
    } else {
        compare_raw(g, x, gd, xd, g_pick, x_pick, r, opt, d);
    }
    compare_lens(g, x, r.top_k, opt, d);  // the logit lens: which layer a difference starts at
    if (!d.failures.empty() && r.first_out_of_tolerance < 0) r.first_out_of_tolerance = k;

    if (!d.tokens_agree) judge_tokens(g, x, g_tok, x_tok, g_pick, x_pick, xd, opt, r, d);
    if (!d.failures.empty() && r.first_out_of_tolerance < 0) r.first_out_of_tolerance = k;
    r.steps.push_back(std::move(d));
    if (g_tok != x_tok) {  // from here on the two runs continue different texts
      r.context_divergence = k;
      if (r.history_divergence < 0) r.history_divergence = k + 1;
      break;
    }
  }

  for (const auto& d : r.steps) {
    if (d.failures.empty()) continue;
    std::string line = "step " + std::to_string(d.step) + ": ";
    for (std::size_t i = 0; i < d.failures.size(); ++i) line += (i ? "; " : "") + d.failures[i];
    r.regressions.push_back(line);
  }

  // ---- lengths ----
  if (same_prompt && r.context_divergence < 0 && r.golden_steps != r.new_steps) {
    const Trace& shorter = r.new_steps < r.golden_steps ? next : golden;
    const bool limit = stop_reason(shorter) == "max_tokens" && gh.max_tokens != nh.max_tokens;
    const std::string msg = "golden has " + std::to_string(r.golden_steps) + " steps (stop: " + stop_reason(golden) +
                            "), new has " + std::to_string(r.new_steps) + " (stop: " + stop_reason(next) + ")";
    if (limit) r.notes.push_back(msg + ": max_tokens differ; compared the common steps");
    else r.regressions.push_back(msg);
  }
  if (opt.propose_profile && r.regression()) r.hints = proposed_profile(golden, next).lines;
  return r;
}

void write_step_verdicts(std::ostream& out, const Trace& golden, const Trace& next, const DiffResult& r) {
  out << "per-step verdicts (" << r.compared << " distribution)\n";
  out << "  step  token         tokens  g∈new  new∈g  KL(g‖n)    KL(n‖g)    max|Δlp|   NMSE       verdict\n";
  for (const auto& d : r.steps) {
    const TraceStep& g = golden.steps[d.step];
    const TraceStep& x = next.steps[d.step];
    char buf[256];
    const std::string tok = show_text(g.token_text, 10);
    auto f = [](double v) {
      char b[32];
      std::snprintf(b, sizeof b, "%-10.3g", v);
      return std::string(b);
    };
    std::snprintf(buf, sizeof buf, "  %4d  %-13s %-7s %-6s %-6s ", d.step, tok.c_str(),
                  g.token == x.token && g.draw.selected == x.draw.selected ? "same" : "DIFF", d.golden_in_new ? "yes" : "NO",
                  d.new_in_golden ? "yes" : "NO");
    out << buf;
    if (!d.reported) out << std::left << std::setw(44) << "(no distribution reported)" << std::right;
    else out << f(d.kl) << " " << f(d.kl_reverse) << " " << f(d.dlogprob) << " " << (d.nmse >= 0 ? f(d.nmse) : std::string("-         "));
    out << " " << (d.failures.empty() ? "ok" : "FAIL: " + d.failures[0]) << "\n";
  }
}

// One side's description: its model's digest, sampler chain, seed, steps, level, and replay if it was one.
static std::string describe_trace(const Trace& t) {
  const TraceHeader& h = t.header;
  int forced = 0;
  for (const auto& s : t.steps) forced += s.forced;
  std::string s = h.model.sha256.substr(0, 12) + "…, " + t.sampler_chain() + ", seed " + std::to_string(h.seed) + ", " +
                  std::to_string(t.steps.size()) + " steps, " + level_name(h.level);
  if (forced) s += ", replay (" + std::to_string(forced) + " forced)";
  return s;
}

// The report's head: both traces, the tolerance applied, and the notes.
static void write_diff_head(std::ostream& out, const Trace& golden, const Trace& next, const DiffResult& r, const DiffOptions& opt) {
  out << "golden: " << golden.path << "\n        " << describe_trace(golden) << "\n";
  out << "new:    " << next.path << "\n        " << describe_trace(next) << "\n";
  out << "tolerance: " << (opt.profile.empty() ? std::string() : "profile " + opt.profile + ": ") << "|Δlogprob|"
      << (r.imported ? "" : ", |Δlogit|") << " <= " << num(opt.atol) << " + " << num(opt.rtol) << "·|golden|, KL <= " << num(opt.kl)
      << " (both directions), " << (opt.tokens_exact ? "tokens exact" : "tokens within each other's top-N") << ", top-" << r.top_k
      << (r.full_logits ? ", every logit (NMSE <= " + num(opt.nmse) + ")" : "") << "\n";
  for (const auto& n : r.notes) out << "note: " << n << "\n";
}

// Candidate i of a step's list, as a row of the side-by-side table: '*' marks the appended token, '>'
// the sampler's own pick where it differs.
static std::string candidate_row(const TraceStep& s, const std::vector<TraceCandidate>& list, int i) {
  std::ostringstream o;
  const TraceCandidate& t = list[i];
  const std::int32_t id = t.id;
  const char mark = id == s.token ? '*' : id == s.draw.selected ? '>' : ' ';
  o << mark << std::setw(2) << i + 1 << " " << std::left << std::setw(18) << show_text(t.text, 14) << std::right
    << std::setw(6) << id << std::fixed << std::setprecision(4);
  if (t.logit) o << std::setw(10) << *t.logit;
  else o << std::setw(10) << "";
  o << std::setw(8) << t.prob;
  return o.str();
}

// Where a side's token ranks in the other side's distribution od (and its probability there).
static std::string where_in(const TraceStep& s, std::int32_t id, const Dist& od, const char* other, int top_k) {
  std::ostringstream o;
  o << token_desc(s, id);
  const int rk = od.rank(id);
  if (rk) o << " is #" << rk << " in " << other << "'s top-" << top_k;
  else o << " is not in " << other << "'s top-" << top_k;
  if (auto lp = od.logprob(id)) o << " (p " << std::setprecision(4) << std::exp(*lp) << " there)";
  return o.str();
}

// One step side by side: both top-K lists, and where each side's choice ranks in the other's.
static void write_step_side_by_side(std::ostream& out, const Trace& golden, const Trace& next, const DiffResult& r, int k,
                                    const char* title) {
  const TraceStep& g = golden.steps[k];
  const TraceStep& x = next.steps[k];
  const StepDiff* d = nullptr;
  for (const auto& s : r.steps)
    if (s.step == k) d = &s;
  out << "\n" << title << ": step " << k << " (" << phase_name(g.phase) << ", pos " << g.pos << ")\n";
  for (const auto& f : d->failures) out << "  " << f << "\n";
  const Dist gd = raw_dist(g, r.top_k, r.full_logits), xd = raw_dist(x, r.top_k, r.full_logits);
  // The model's distribution, or, when it agrees and a sampler stage is where the runs part, that stage's.
  const bool stage_view = d->raw_within && d->stage_index >= 0 && d->stage_index < static_cast<int>(g.stages.size()) &&
                          d->stage_index < static_cast<int>(x.stages.size());
  // A post-sampling import is shown beside the other side's last stage (what it is compared with).
  auto post_list = [&](const Trace& t, const TraceStep& s) -> const std::vector<TraceCandidate>& {
    return r.compared == "post" && !t.header.imported && !s.stages.empty() ? s.stages.back().top : s.top;
  };
  const std::vector<TraceCandidate>& glist = stage_view ? g.stages[d->stage_index].top : post_list(golden, g);
  const std::vector<TraceCandidate>& xlist = stage_view ? x.stages[d->stage_index].top : post_list(next, x);
  if (stage_view)
    out << "  the model's distributions agree; they part after sampler stage " << d->stage_index + 1 << ", "
        << g.stages[d->stage_index].name << " (kept: golden " << g.stages[d->stage_index].kept << ", new "
        << x.stages[d->stage_index].kept << "):\n";
  const int gn = std::min<int>(r.top_k, glist.size()), xn = std::min<int>(r.top_k, xlist.size());
  const int rows = std::max(gn, xn);
  out << "   " << std::left << std::setw(52) << "GOLDEN" << "NEW\n" << std::right;
  out << "   " << std::left << std::setw(52) << " #  token                 id     logit    prob"
      << " #  token                 id     logit    prob\n" << std::right;
  for (int i = 0; i < rows; ++i) {
    std::string a = i < gn ? candidate_row(g, glist, i) : "";
    std::string b = i < xn ? candidate_row(x, xlist, i) : "";
    out << "  " << a << std::string(a.size() < 53 ? 53 - a.size() : 1, ' ') << b << "\n";
  }
  out << "  (* appended token, > the sampler's own pick where it differs)\n";
  if (!d->lens.empty()) {  // the logit lens: at which layer the two runs start to part
    out << "  lens |Δlogprob| by layer:";
    for (const auto& l : d->lens) out << " " << l.layer << (l.attn ? "a" : "") << ":" << num(l.dlogprob);
    out << "  (a: inside the block, after attention)\n";
  }
  out << "  golden's choice " << where_in(g, g.draw.selected, xd, "new", r.top_k) << "\n";
  out << "  new's choice    " << where_in(x, x.draw.selected, gd, "golden", r.top_k) << "\n";
  if (x.forced && x.token != x.draw.selected)
    out << "  (new was teacher-forced to " << token_desc(x, x.token) << ")\n";
}

// The summary: steps compared, token agreement, the largest differences and where, top-N membership,
// the histories.
static void write_diff_summary(std::ostream& out, const Trace& next, const DiffResult& r) {
  auto at = [&](auto member) {
    double best = 0;
    int step = -1;
    for (const auto& s : r.steps)
      if (s.*member > best || step < 0) best = s.*member, step = s.step;
    return std::make_pair(best, step);
  };
  const auto [mlp, mlp_s] = at(&StepDiff::dlogprob);
  const auto [mlg, mlg_s] = at(&StepDiff::dlogit);
  const auto [mkl, mkl_s] = at(&StepDiff::kl);
  const auto [mst, mst_s] = at(&StepDiff::dstage);
  const int compared = static_cast<int>(r.steps.size());
  const int total = std::max(r.golden_steps, r.new_steps);
  out << "\nsummary\n";
  out << "  steps compared:  " << compared << " of " << total;
  if (compared == total) out << " (every step)";
  else if (r.context_divergence >= 0)
    out << " (the texts diverge after step " << r.context_divergence << "; `glassbox run --replay GOLDEN` compares every step)";
  out << "\n";
  out << "  token agreement: " << r.token_agree << "/" << compared;
  if (r.first_token_divergence >= 0) out << " (first difference at step " << r.first_token_divergence << ")";
  out << "\n";
  auto line = [&](const char* name, double v, int s) {
    out << "  " << name << std::setprecision(3) << v;
    if (s >= 0 && compared) out << " (step " << s << ")";
    out << "\n";
  };
  line("max |Δlogprob|:  ", mlp, mlp_s);
  if (!r.imported) line("max |Δlogit|:    ", mlg, mlg_s);  // an imported side has logprobs, not logits
  line(r.full_logits ? "max KL:          " : "max KL (bound):  ", mkl, mkl_s);
  const auto [mkr, mkr_s] = at(&StepDiff::kl_reverse);
  line(r.full_logits ? "max KL(new‖gold): " : "max KL(new‖gold) (bound): ", mkr, mkr_s);
  const auto [mnm, mnm_s] = at(&StepDiff::nmse);
  if (mnm >= 0 && r.full_logits) line("max NMSE:        ", mnm, mnm_s);
  int outside = 0, silent = 0;
  for (const auto& s : r.steps) outside += !s.golden_in_new || !s.new_in_golden, silent += !s.reported;
  out << "  top-N membership: " << (outside ? std::to_string(outside) + " step(s) where a side's pick is not in the other's list" : std::string("every pick in the other's list")) << "\n";
  if (silent) out << "  not reported:    " << silent << " step(s) without a distribution from the engine (tokens compared only)\n";
  if (r.history_divergence >= 0) {
    bool replay = false;
    for (const auto& s : next.steps) replay = replay || s.forced;
    if (replay)
      out << "  histories:       new's own pick departs from the golden's at step " << r.history_divergence - 1 << "; from step "
          << r.history_divergence << " on, new was teacher-forced on the golden's tokens (compared on the golden's history)\n";
    else
      out << "  histories:       differ from step " << r.history_divergence << " on (not compared; `glassbox run --replay GOLDEN` compares them on the golden's history)\n";
  }
  if (!r.imported) line("max stage |Δlp|: ", mst, mst_s);  // an imported side has no stages
}

// The words to read the report by, then the verdict: the regressions (and hints), or OK.
static void write_diff_verdict(std::ostream& out, const DiffResult& r) {
  out << "\nhow to read this\n"
         "  logprob      log of a token's probability (0 = certain; -0.69 = one chance in two)\n"
         "  |Δlogprob|   how far apart the two runs put the same token's logprob (0.01 ≈ 1% relative)\n"
         "  |Δlogit|     the same for the raw scores the model outputs before softmax\n"
         "  KL           the information lost using new's distribution for golden's (0 = identical)\n"
         "  stage        the distribution after one sampler stage (top-k, top-p, temperature, ...)\n"
         "  cut          a token a stage removed in one run and kept in the other\n";
  if (r.regression()) {
    out << "\nREGRESSION: " << r.regressions.size() << " difference" << (r.regressions.size() == 1 ? "" : "s") << "\n";
    const std::size_t show = 12;
    for (std::size_t i = 0; i < std::min(show, r.regressions.size()); ++i) out << "  " << r.regressions[i] << "\n";
    if (r.regressions.size() > show) out << "  ... and " << r.regressions.size() - show << " more\n";
    for (const auto& h : r.hints) out << "hint: " << h << "\n";
  } else {
    out << "\nOK: within tolerance\n";
  }
}

void write_diff_report(std::ostream& out, const Trace& golden, const Trace& next, const DiffResult& r,
                       const DiffOptions& opt) {
  write_diff_head(out, golden, next, r, opt);
  const int k = r.first_divergent_step();
  if (k >= 0) write_step_side_by_side(out, golden, next, r, k, "first divergent step");
  if (r.first_token_divergence >= 0 && r.first_token_divergence != k)
    write_step_side_by_side(out, golden, next, r, r.first_token_divergence, "first token divergence");
  write_diff_summary(out, next, r);
  write_diff_verdict(out, r);
}

}  // namespace glassbox::traces
