// The YAML config fuzz target's body (`glassbox run --config` without a model): shared by
// tests/fuzz/fuzz_config.cpp and test_fuzz_regressions. Kept apart from targets.hpp because it needs the
// CLI's option handling (cli/session.hpp, from glassbox_session).
#pragma once
#include <vector>

#include "../../cli/session.hpp"
#include "targets.hpp"

namespace gbfuzz {

// A config file: the options it sets (cli::read_config), then what open_session builds from them before
// and besides the model: every plugin resolved (cli::check_plugins), the attention store for a small model
// shape, the chain made for a 64-token vocabulary (logit-bias checks its ids) and run for a few steps. The config's plugin_path is
// not loaded (modules are trusted code, docs/reliability.md) and its files are not opened.
inline int config(const std::uint8_t* data, std::size_t size) {
  TempFile f(data, size, "config.yaml");
  try {
    const glassbox::cli::RunOptions opt = glassbox::cli::read_config(f.path().string());
    std::vector<std::string> warnings;
    glassbox::cli::check_plugins(registry(), opt.tokenizer, opt, warnings);
    constexpr int kVocab = 64;
    auto kv = registry().make_attention(opt.attention, glassbox::AttentionShape{1, 2, 1, 4, 32});
    glassbox::KvState state;
    kv->describe(state);
    // The chain as a run over a 64-token model makes it: its stages check themselves against the
    // vocabulary they are given (logit-bias's ids).
    glassbox::PluginContext context;
    context.vocab_size = kVocab;
    auto stages = glassbox::check_run_spec(registry(), glassbox::cli::run_spec(opt), warnings, context);
    glassbox::SamplerChain chain(std::move(stages), kVocab, opt.seed.value_or(1));
    std::vector<float> logits(kVocab);
    glassbox::StageRecorder recorder(chain, kVocab, 5);
    for (int step = 0; step < 4; ++step) {
      for (int i = 0; i < kVocab; ++i) logits[i] = static_cast<float>((i * 7 + step * 3) % 11) - 5.0f;
      const std::int32_t id = chain.sample(logits, step % 2 == 1 ? &recorder : nullptr).id;
      if (id < 0 || id >= kVocab) {
        std::fprintf(stderr, "fuzz_config: sampler chain chose id %d of a %d-token vocabulary\n", id, kVocab);
        std::abort();
      }
      chain.accept(id);
    }
  } catch (const glassbox::Error&) {
  }
  return 0;
}

}  // namespace gbfuzz
