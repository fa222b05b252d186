// Sampler "xtc" (exclude top choices; as llama.cpp's llama_sampler_init_xtc): with probability
// `probability`, removes every candidate whose probability reaches `threshold` except the least
// likely of them, so that the model is pushed off its most obvious continuations.
#include "stage.hpp"

namespace {

using namespace glassbox;

class Xtc final : public samplers::Stage {
 public:
  Xtc(Params p, double probability, double threshold, std::int64_t min_keep)
      : Stage("xtc", std::move(p)),
        probability_(static_cast<float>(probability)),
        threshold_(static_cast<float>(threshold)),
        min_keep_(static_cast<std::size_t>(min_keep)) {}

  void apply(Candidates& c, Rng& rng) override {
    // Off, or nothing to exclude: no number is drawn, so the rest of the chain sees the same
    // generator as without the stage (llama.cpp returns before its draw too). A threshold above
    // 0.5 can hold at most one candidate, which is always kept: off as well.
    if (probability_ <= 0.0f || threshold_ > 0.5f || c.data.size() < 2) return;
    // The coin, from the run's generator; recorded in the stage's trace record (`u`).
    const float chance = rng.uniform();
    c.u = chance;
    if (chance > probability_) return;
    c.softmax();  // canonical order, probabilities over what is left
    // The top candidates with p >= threshold are data[0..last]; all but the last of them go.
    std::size_t last = 0;
    for (std::size_t i = 0; i < c.data.size(); ++i) {
      if (c.data[i].prob >= threshold_) last = i;
      else break;
    }
    if (last > 0 && c.data.size() - last >= min_keep_) c.data.erase(c.data.begin(), c.data.begin() + static_cast<std::ptrdiff_t>(last));
  }

  std::string noop_reason() const override {
    if (probability_ <= 0.0f) return "probability = 0 (off, its default); e.g. xtc:probability=0.5 turns it on";
    if (threshold_ > 0.5f)
      return "threshold = " + format_param_value(static_cast<double>(threshold_)) +
             " > 0.5 holds at most one candidate, which is always kept; e.g. xtc:probability=0.5;threshold=0.1 turns it on";
    return {};
  }

 private:
  float probability_, threshold_;
  std::size_t min_keep_;
};

void register_factories(Registrar& r) {
  r.add_sampler({"xtc", "exclude top choices: with probability P, drop every token with p >= threshold but the least likely of them",
                 {{"probability", ParamType::Float, "0.0", "chance of acting at each step, 0 <= P <= 1; 0 = off", 0.0, 1.0},
                  {"threshold", ParamType::Float, "0.1", "0 <= threshold <= 1; above 0.5 the stage never acts", 0.0, 1.0},
                  {"min_keep", ParamType::Int, "1", "act only when at least this many candidates remain, >= 0", 0.0, std::nullopt}},
                 "probability"},
                [](const Params& p, const PluginContext&) {
                  const double prob = samplers::finite_param("xtc", p, "probability");
                  const double thr = samplers::finite_param("xtc", p, "threshold");
                  const std::int64_t keep = p.get_int("min_keep");
                  if (!(prob >= 0 && prob <= 1)) throw samplers::invalid("xtc", "probability", prob, "is outside [0, 1]");
                  if (!(thr >= 0 && thr <= 1)) throw samplers::invalid("xtc", "threshold", thr, "is outside [0, 1]");
                  if (keep < 0) throw samplers::invalid("xtc", "min_keep", keep, "is negative (expected min_keep >= 0)");
                  return std::make_unique<Xtc>(p, prob, thr, keep);
                });
}

}  // namespace

GLASSBOX_MODULE("xtc", "exclude top choices (XTC)", register_factories)
