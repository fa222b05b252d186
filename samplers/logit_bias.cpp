// Sampler "logit-bias": adds a fixed bias to chosen tokens' logits; a bias of -inf bans a token.
// Parameter: "id=bias;id=bias", e.g. "13=-inf;42=2.5" (';' separates, since ',' separates stages).
#include <charconv>
#include <sstream>

#include "stage.hpp"

namespace {

using namespace glassbox;

std::string trim(std::string s) {
  s.erase(0, s.find_first_not_of(" \t"));
  s.erase(s.find_last_not_of(" \t") + 1);
  return s;
}

samplers::IdTable<float> parse_biases(const std::string& text) {
  samplers::IdTable<float> out;
  auto bad = [&](const std::string& item, const std::string& why) {
    return samplers::invalid("logit-bias", "bias", text,
                             "has a bad entry '" + item + "': " + why + " (expected ID=BIAS;ID=BIAS, e.g. 13=-inf;42=2.5)");
  };
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ';')) {
    item = trim(item);
    if (item.empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string::npos) throw bad(item, "no '='");
    const std::string id_text = trim(item.substr(0, eq)), bias_text = trim(item.substr(eq + 1));
    std::int32_t id = 0;
    auto [p, ec] = std::from_chars(id_text.data(), id_text.data() + id_text.size(), id);
    if (id_text.empty() || ec != std::errc() || p != id_text.data() + id_text.size() || id < 0)
      throw bad(item, "token id '" + id_text + "' is not a non-negative integer");
    float bias = 0;
    if (bias_text == "-inf") {
      bias = -INFINITY;
    } else {
      auto [q, ec2] = std::from_chars(bias_text.data(), bias_text.data() + bias_text.size(), bias);
      if (bias_text.empty() || ec2 != std::errc() || q != bias_text.data() + bias_text.size())
        throw bad(item, "bias '" + bias_text + "' is not a number");
      if (!std::isfinite(bias)) throw bad(item, "bias '" + bias_text + "' is not finite (only -inf, a ban, is allowed)");
    }
    for (const auto& [other, b] : out)
      if (other == id) throw bad(item, "token " + id_text + " is listed twice");
    out.emplace_back(id, bias);
  }
  std::sort(out.begin(), out.end());
  return out;
}

class LogitBias final : public samplers::Stage {
 public:
  LogitBias(Params p, samplers::IdTable<float> b) : Stage("logit-bias", std::move(p)), bias_(std::move(b)) {}
  void apply(Candidates& c, Rng&) override {
    if (bias_.empty()) return;
    bool banned = false;
    samplers::for_each_listed(c, bias_, [&](Candidate& x, float b) {
      x.logit += b;
      banned |= std::isinf(b);
    });
    // A banned token leaves the candidates, so that no later stage can bring it back.
    if (banned)
      c.data.erase(std::remove_if(c.data.begin(), c.data.end(),
                                  [](const Candidate& x) { return std::isinf(x.logit) && x.logit < 0; }),
                   c.data.end());
    c.sorted = false;
  }

 private:
  samplers::IdTable<float> bias_;
};

void register_factories(Registrar& r) {
  r.add_sampler({"logit-bias", "add a bias to given tokens' logits (\"ID=BIAS;ID=BIAS\", -inf bans)",
                 {{"bias", ParamType::String, "", "ID=BIAS pairs separated by ';', e.g. 13=-inf;42=2.5", std::nullopt,
                   std::nullopt}},
                 "bias"},
                [](const Params& p, const PluginContext& ctx) {
                  auto biases = parse_biases(p.get_string("bias"));
                  // An id the model does not have would silently do nothing: checked here, against the
                  // vocabulary the run's context names (0: not known yet, the run that knows checks again).
                  if (ctx.vocab_size > 0)
                    for (const auto& [id, b] : biases)
                      if (id >= ctx.vocab_size)
                        throw ConfigError("sampler 'logit-bias': token id " + std::to_string(id) +
                                          " is outside the model's vocabulary of " + std::to_string(ctx.vocab_size) + " tokens");
                  return std::make_unique<LogitBias>(p, std::move(biases));
                });
}

}  // namespace

GLASSBOX_MODULE("logit-bias", "per-token logit bias", register_factories)
