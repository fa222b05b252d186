// Shared pieces of the built-in sampler modules (header-only; each module is its own library).
#pragma once
#include <cmath>
#include <string>
#include <algorithm>
#include <vector>
#include <utility>

#include <glassbox/error.hpp>
#include <glassbox/plugin.hpp>

namespace glassbox::samplers {

// A stage that remembers its name and the parameters it was created with.
class Stage : public Sampler {
 public:
  Stage(std::string name, Params p) : name_(std::move(name)), params_(std::move(p)) {}
  std::string name() const override { return name_; }
  const Params& params() const override { return params_; }

 protected:
  std::string name_;
  Params params_;
};

// The factory-side check: "sampler 'top-p': parameter 'p' = '0' is outside (0, 1]".
inline ConfigError invalid(const std::string& stage, const std::string& param, const ParamValue& v,
                           const std::string& why) {
  return ConfigError("sampler '" + stage + "': parameter '" + param + "' = '" + format_param_value(v) + "' " + why);
}

// Reads a float parameter and rejects NaN/inf (params.cpp already does for parsed text;
// this also covers values set programmatically).
inline double finite_param(const std::string& stage, const Params& p, const std::string& name) {
  const double v = p.get_float(name);
  if (!std::isfinite(v)) throw invalid(stage, name, v, "is not a finite number");
  return v;
}

// Token ids with a value each (a count, a bias), kept sorted by id. A flat vector: no
// allocation once its capacity is reached, so a decode step allocates nothing.
template <class Value>
using IdTable = std::vector<std::pair<std::int32_t, Value>>;

// Calls f(candidate, value) for each candidate whose id is in `by_id` (sorted by id). Fast
// path: while the array is still in id order (as the chain builds it, and after stages that
// only rescale logits), candidate `id` sits at index `id`; when that holds for every listed
// id, each is found directly. Otherwise one pass over the candidates, with a binary search.
template <class Value, class F>
void for_each_listed(Candidates& c, const IdTable<Value>& by_id, F&& f) {
  if (by_id.empty()) return;
  bool direct = true;
  for (const auto& [id, v] : by_id)
    if (id >= 0 && (static_cast<std::size_t>(id) >= c.data.size() || c.data[id].id != id)) { direct = false; break; }
  if (direct) {
    for (const auto& [id, v] : by_id)
      if (id >= 0) f(c.data[id], v);
    return;
  }
  const std::int32_t lo = by_id.front().first, hi = by_id.back().first;
  for (auto& cand : c.data) {
    if (cand.id < lo || cand.id > hi) continue;
    auto it = std::lower_bound(by_id.begin(), by_id.end(), cand.id,
                               [](const auto& e, std::int32_t id) { return e.first < id; });
    if (it != by_id.end() && it->first == cand.id) f(cand, it->second);
  }
}

}  // namespace glassbox::samplers
