// The engine: tokenize -> PREFILL -> DECODE (forward -> distribution -> sampler -> append -> stream).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "glassbox/attention.hpp"
#include "glassbox/transformer.hpp"
#include "glassbox/sampling.hpp"
#include "glassbox/tokenizer.hpp"
#include "glassbox/trace_events.hpp"

namespace glassbox {

struct GenerateOptions {
  int max_tokens = 256;           // tokens to generate at most
  bool stop_at_eos = true;        // EOS ends generation
  bool stop_at_bos = true;        // so does BOS: llama2.c-trained models separate texts with it
  TraceLevel level = TraceLevel::Basic;
  int trace_top_k = 10;           // candidates listed per step and per stage
  std::uint64_t seed = 0;
  // Record the distribution after each sampler stage (StepEvent::stages, chain_prob). Costs
  // a copy and a partial sort per stage per step; turn off when no one reads the events.
  bool record_stages = true;
  // Each step's raw distribution: softmax, entropy and top-k (off: steps carry only the token,
  // KV usage and timing — what a run without a trace needs).
  bool report_distribution = true;
  // Teacher forcing: when non-empty, these tokens are appended instead of the sampled ones
  // (the distribution and the sampler's choice are still computed and traced).
  std::vector<std::int32_t> forced;
};

// Receives each generated piece as soon as it is chosen.
using StreamFn = std::function<void(std::string_view piece)>;

class Engine {
 public:
  Engine(Transformer& model, const Tokenizer& tokenizer, Attention& attention, SamplerChain& sampler);

  // Runs one generation. `header` is completed with the prompt ids and sent to `sink` first.
  Summary generate(std::string_view prompt, const GenerateOptions& opt, RunHeader header,
                   TraceSink& sink, const StreamFn& on_piece);

 private:
  Transformer& model_;
  const Tokenizer& tok_;
  Attention& attn_;
  SamplerChain& sampler_;
  std::vector<float> probs_;       // (vocab_size) raw softmax of the current logits
  std::vector<std::int32_t> order_;  // (vocab_size) scratch for top-k selection
  std::vector<TokenProb> top_;     // (trace_top_k)
};

}  // namespace glassbox
