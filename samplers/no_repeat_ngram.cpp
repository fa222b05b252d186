// Sampler "no-repeat-ngram" (Hugging Face's no_repeat_ngram_size): bans every token that would complete
// an n-gram already present in the sequence (prompt included), so no n tokens in a row ever repeat.
#include "stage.hpp"

namespace {

using namespace glassbox;

class NoRepeatNgram final : public samplers::Stage {
 public:
  NoRepeatNgram(Params p, std::int64_t n) : Stage("no-repeat-ngram", std::move(p)), n_(static_cast<std::size_t>(n)) {}

  void accept(std::int32_t token) override {
    if (n_ > 0) tokens_.push_back(token);
  }
  void reset() override { tokens_.clear(); }

  void apply(Candidates& c, Rng&) override {
    // Hugging Face: nothing is banned until the sequence holds n - 1 tokens after which one could
    // complete an n-gram (cur_len + 1 < n). The banned tokens are those that followed, anywhere
    // earlier, the sequence's last n - 1 tokens.
    const std::size_t len = tokens_.size();
    if (n_ == 0 || len + 1 < n_) return;
    banned_.clear();
    const std::size_t k = n_ - 1;  // prefix length
    for (std::size_t i = 0; i + n_ <= len; ++i) {
      bool same = true;
      for (std::size_t j = 0; j < k && same; ++j) same = tokens_[i + j] == tokens_[len - k + j];
      if (same) banned_.push_back({tokens_[i + k], 0});
    }
    if (banned_.empty()) return;
    std::sort(banned_.begin(), banned_.end());
    banned_.erase(std::unique(banned_.begin(), banned_.end()), banned_.end());
    // Banned tokens leave the candidates (as a -inf logit-bias does), so no later stage brings them back.
    bool any = false;
    samplers::for_each_listed(c, banned_, [&](Candidate& x, int) {
      x.logit = -INFINITY;
      any = true;
    });
    if (!any) return;
    if (std::all_of(c.data.begin(), c.data.end(), [](const Candidate& x) { return x.logit == -INFINITY; }))
      throw ConfigError("sampler 'no-repeat-ngram': every candidate would repeat an " + std::to_string(n_) +
                        "-gram of the sequence (lower n, or place the stage before truncating ones)");
    c.data.erase(std::remove_if(c.data.begin(), c.data.end(), [](const Candidate& x) { return x.logit == -INFINITY; }),
                 c.data.end());
  }

 private:
  std::size_t n_;
  std::vector<std::int32_t> tokens_;
  samplers::IdTable<int> banned_;
};

void register_factories(Registrar& r) {
  r.add_sampler({"no-repeat-ngram", "ban any token that would complete an n-gram already in the sequence (Hugging Face)",
                 {{"n", ParamType::Int, "3", "n-gram size, >= 0; 0 = off, 1 bans every token seen", 0.0, 1048576.0}},
                 "n"},
                [](const Params& p, const PluginContext&) {
                  const std::int64_t n = p.get_int("n");
                  if (n < 0) throw samplers::invalid("no-repeat-ngram", "n", n, "is negative (expected n >= 0)");
                  return std::make_unique<NoRepeatNgram>(p, n);
                });
}

}  // namespace

GLASSBOX_MODULE("no-repeat-ngram", "no repeated n-grams (Hugging Face's no_repeat_ngram_size)", register_factories)
