// The stories260K fixture of the tests that drive the model directly (engine, attention, beam, model):
// the checkpoint from ../shared, its tok512 tokenizer, the default registry, the modules built from
// them, and llama2.c's golden run of it.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "glassbox/model.hpp"
#include "glassbox/pipeline.hpp"
#include "glassbox/registry.hpp"
#include "support.hpp"

namespace gbtest {

// llama2.c's greedy runs of stories260K (../shared/golden/llama2c-stories260K-greedy.jsonl), one
// line a prompt: its ids, each step's logits and the greedy continuation; empty without ../shared.
inline std::vector<nlohmann::json> golden() {
  if (!shared_dir()) return {};
  return read_jsonl(shared("golden/llama2c-stories260K-greedy.jsonl"));
}

// Loaded once per test program (each keeps a static one). Without ../shared it stays empty: the suites
// that use it carry the gbtest::NeedsShared precondition and are skipped. A test's own fixture derives
// from it for what it builds on top (a Transformer, a chain); members it adds are destroyed before the
// registry whose plugins made them.
struct Stories260K {
  glassbox::Registry reg;
  std::unique_ptr<glassbox::ModelSource> ckpt;
  std::unique_ptr<glassbox::Tokenizer> tok;

  Stories260K() {
    if (!shared_dir()) return;
    reg.load_default();
    ckpt = glassbox::ModelSource::open(shared("models/stories260K.bin"));
    tok = reg.make_tokenizer({"llama2c", {{"path", shared("models/tok512.bin").string()}}});
  }
  // An attention module from a spec as --attention takes it ("kv-cache", "sliding-window:16").
  std::unique_ptr<glassbox::KvStore> module(const std::string& spec) const {
    return reg.make_attention(glassbox::parse_plugin_spec(spec, "attention"), ckpt->config().attention_shape());
  }
  // A greedy chain (seed 1) over the model's vocabulary.
  std::unique_ptr<glassbox::SamplerChain> greedy_chain() const {
    std::vector<std::string> warnings;
    return std::make_unique<glassbox::SamplerChain>(glassbox::build_sampler_stages(reg, {{"greedy", {}}}, warnings),
                                                    ckpt->config().vocab_size, 1);
  }
};

}  // namespace gbtest
