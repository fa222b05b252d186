// Other engines' logprob dialects (llama.cpp's server, OpenAI, vLLM, TGI, Hugging Face .npy, llama.cpp's
// --kl-divergence-base file) read into one shape, with every token aligned to the model's vocabulary.
// docs/golden-traces.md, "testing your engine against glassbox", describes each dialect.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "glassbox/tokenizer.hpp"

namespace glassbox::cli {

// One reported candidate, aligned: its id and its logprob (raw) or probability (post).
struct ImportedCandidate {
  std::int32_t id = 0;
  double value = 0;
};

// One generation step of the other engine.
struct ImportedStep {
  std::int32_t token = 0;               // the id appended after this step
  bool reported = false;                // false: the engine reported no distribution here (held back, trimmed)
  std::optional<double> chosen;         // the token's logprob (raw) or probability (post), when given
  std::vector<ImportedCandidate> top;   // as listed, most likely first
  std::optional<double> unlisted;       // mass outside `top`, when the engine says (kld: logprob floor known)
  std::vector<float> logits;            // every logit (npy) or every known log-probability (kld), else empty
  std::string where;                    // "FILE:LINE" of the entry, for messages
};

struct ImportedRun {
  std::string dialect;       // llamacpp-completion, llamacpp-post, llamacpp-old, openai-chat, openai-chat-post,
                             // openai-legacy, vllm, tgi, hf-npy, llamacpp-kld
  std::string distribution;  // raw | post | logits
  std::optional<std::string> prompt;               // the prompt text, where the file or a sidecar holds it
  std::optional<std::vector<std::int32_t>> prompt_ids;
  std::vector<ImportedStep> steps;
  std::vector<std::string> notes;  // what was reconstructed or left out, one line each (printed on stderr)
};

// The dialects --from accepts.
const std::vector<std::string>& import_dialects();

// Whether FILE looks like another engine's output rather than a glassbox golden JSONL / float32 dump.
bool is_engine_file(const std::string& path);

// Reads FILE (a whole response, a saved SSE stream, a JSONL of responses — `index` picks one — a .npy or
// a .kld file), detecting the dialect by shape unless `from` names it, and aligns every token to `tok`.
// Errors are InputErrors naming the file, line and field ("FILE:3: completion_probabilities[2].top_logprobs[1].logprob: ...").
ImportedRun read_engine_file(const std::string& path, const std::string& from, int index, const Tokenizer& tok);

}  // namespace glassbox::cli
