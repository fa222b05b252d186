// Sampler "top-k": keeps the k most likely candidates (ties to the lower id); k = 0 keeps all.
#include "stage.hpp"

namespace {

using namespace glassbox;

class TopK final : public samplers::Stage {
 public:
  TopK(Params p, std::int64_t k) : Stage("top-k", std::move(p)), k_(static_cast<std::size_t>(k)) {}
  void apply(Candidates& c, Rng&) override {
    if (k_ == 0 || k_ >= c.data.size()) return;
    // nth_element + sort of the first k: O(n + k log k), never a full sort.
    c.sort_prefix(k_);
    c.truncate(k_);
    c.sorted = true;
  }

 private:
  std::size_t k_;
};

void register_factories(Registrar& r) {
  r.add_sampler({"top-k", "keep the k most likely tokens (ties to the lower id); 0 keeps all",
                 {{"k", ParamType::Int, "40", "k >= 0; 0 or k >= vocabulary keeps every token", 0.0, std::nullopt}},
                 "k"},
                [](const Params& p, const PluginContext&) {
                  const std::int64_t k = p.get_int("k");
                  if (k < 0) throw samplers::invalid("top-k", "k", k, "is negative (expected k >= 0)");
                  return std::make_unique<TopK>(p, k);
                });
}

}  // namespace

GLASSBOX_MODULE("top-k", "top-k truncation", register_factories)
