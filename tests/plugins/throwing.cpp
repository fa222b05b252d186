// A sampler whose apply() throws a std::exception: the registry's guard must name the module.
#include <stdexcept>

#include <glassbox/plugin.hpp>

namespace {
class Throwing final : public glassbox::Sampler {
 public:
  std::string name() const override { return "throwing"; }
  const glassbox::Params& params() const override { return params_; }
  void apply(glassbox::Candidates&, glassbox::Rng&) override { throw std::logic_error("boom"); }
 private:
  glassbox::Params params_;
};
void register_factories(glassbox::Registrar& r) {
  r.add_sampler({"throwing", "throws from apply()", {}, ""},
                [](const glassbox::Params&, const glassbox::PluginContext&) { return std::make_unique<Throwing>(); });
}
}  // namespace

GLASSBOX_MODULE("throwing", "test module that throws", register_factories)
