// Sampler "mirostat-v2" (Basu et al. 2021, algorithm 2 as in llama.cpp): a feedback loop that
// steers the surprise of the chosen tokens towards a target tau. It keeps a threshold mu
// (bits, starting at 2 tau), drops the candidates whose surprise -log2 p exceeds mu, draws
// from the rest, and after each accepted token moves mu by -eta * (surprise - tau).
#include <vector>

#include "stage.hpp"

namespace {

using namespace glassbox;

class MirostatV2 final : public samplers::Stage {
 public:
  MirostatV2(Params p, double tau, double eta)
      : Stage("mirostat-v2", std::move(p)), tau_(tau), eta_(eta), mu_(2 * tau) {}
  Selection selection() const override { return Selection::Adaptive; }

  void apply(Candidates& c, Rng& rng) override {
    // Room for every candidate once, so that no later step allocates.
    if (kept_.capacity() < c.data.size()) kept_.reserve(c.data.size());
    c.normalize();
    // Surprise -log2 p_i > mu  <=>  p_i < 2^-mu. Keep at least the most likely candidate.
    const double floor_p = std::exp2(-mu_);
    const Candidate best = c.data[c.argmax()];
    c.data.erase(std::remove_if(c.data.begin(), c.data.end(),
                                [&](const Candidate& x) { return !(static_cast<double>(x.prob) >= floor_p); }),
                 c.data.end());
    if (c.data.empty()) c.data.assign(1, best);
    c.sorted = false;
    c.draw(rng);  // renormalises over what is left, then the weighted draw
    kept_.clear();
    for (const auto& x : c.data) kept_.push_back({x.id, x.prob});
    pending_ = true;
  }

  // mu follows the token actually appended: its surprise under the truncated distribution.
  // (A teacher-forced token outside that set leaves mu unchanged.) Prompt tokens arrive
  // before any draw and are ignored.
  void accept(std::int32_t token) override {
    if (!pending_) return;
    pending_ = false;
    for (const auto& [id, p] : kept_)
      if (id == token && p > 0) {
        mu_ -= eta_ * (-std::log2(static_cast<double>(p)) - tau_);
        return;
      }
  }

  void reset() override {
    mu_ = 2 * tau_;
    pending_ = false;
    kept_.clear();
  }

 private:
  double tau_, eta_, mu_;
  bool pending_ = false;
  std::vector<std::pair<std::int32_t, float>> kept_;
};

void register_factories(Registrar& r) {
  r.add_sampler({"mirostat-v2", "steer each token's surprise towards tau bits (selects the token)",
                 {{"tau", ParamType::Float, "5.0", "target surprise in bits, tau >= 0", 0.0, std::nullopt},
                  {"eta", ParamType::Float, "0.1", "learning rate, 0 <= eta <= 1", 0.0, 1.0}},
                 "tau"},
                [](const Params& p, const PluginContext&) {
                  const double tau = samplers::finite_param("mirostat-v2", p, "tau");
                  const double eta = samplers::finite_param("mirostat-v2", p, "eta");
                  if (tau < 0) throw samplers::invalid("mirostat-v2", "tau", tau, "is negative (expected tau >= 0)");
                  if (!(eta >= 0 && eta <= 1)) throw samplers::invalid("mirostat-v2", "eta", eta, "is outside [0, 1]");
                  return std::make_unique<MirostatV2>(p, tau, eta);
                });
}

}  // namespace

GLASSBOX_MODULE("mirostat-v2", "mirostat version 2", register_factories)
