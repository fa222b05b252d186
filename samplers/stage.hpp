// Shared pieces of the built-in sampler modules (header-only; each module is its own library).
#pragma once
#include <cmath>
#include <string>
#include <unordered_map>
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

// Calls f(candidate, value) for each candidate whose id is a key of `by_id`. Fast path:
// while the array is still in id order (as the chain builds it, and after stages that only
// rescale logits), candidate `id` sits at index `id`; when that holds for every listed id
// each is found directly, otherwise one pass over the candidates finds them.
template <class Value, class F>
void for_each_listed(Candidates& c, const std::unordered_map<std::int32_t, Value>& by_id, F&& f) {
  if (by_id.empty()) return;
  bool direct = true;
  for (const auto& [id, v] : by_id)
    if (id >= 0 && (static_cast<std::size_t>(id) >= c.data.size() || c.data[id].id != id)) { direct = false; break; }
  if (direct) {
    for (const auto& [id, v] : by_id)
      if (id >= 0) f(c.data[id], v);
    return;
  }
  for (auto& cand : c.data) {
    auto it = by_id.find(cand.id);
    if (it != by_id.end()) f(cand, it->second);
  }
}

}  // namespace glassbox::samplers
