// The decoding strategy run and chat share (strategy_choice.hpp): the checks of the combination, the draft
// session, and one generation by sampling, beam search or speculative decoding.
#include "strategy_choice.hpp"

#include "glassbox/beam_search.hpp"
#include "glassbox/error.hpp"
#include "interrupt.hpp"

namespace glassbox::cli {

RunOptions StrategyChoice::session_options(const RunOptions& opt, const std::function<bool(const char*)>& given) {
  if (opt.draft_model.empty() && (given("draft_tokens") || given("draft_tokenizer")))
    throw ConfigError(std::string(given("draft_tokens") ? "--draft-tokens" : "--draft-tokenizer") +
                      " sets up speculative decoding: name the draft with --draft-model");
  if (!opt.draft_model.empty() && opt.beam_width > 0)
    throw ConfigError("--draft-model and --beam-width: speculative decoding samples one sequence, beam search keeps several; use one of them");
  if (opt.beam_width == 0) {
    if (given("length_penalty")) throw ConfigError("--length-penalty applies to beam search only: add --beam-width N");
    return opt;
  }
  for (const auto& p : opt.sampler)
    if (p.name != "greedy")
      throw ConfigError("--beam-width ranks continuations by the model's own log-probabilities; the sampler chain does not "
                        "apply: drop --sampler " + p.to_string() + " (docs/beam-search.md)");
  if (!opt.replay.empty()) throw ConfigError("--beam-width cannot replay a golden (--replay): a beam search chooses whole sequences");
  // A grammar is a sampler stage; the search ranks the raw distribution and would silently ignore it.
  if (!opt.grammar.empty() || !opt.json_schema.empty())
    throw ConfigError(std::string(opt.grammar.empty() ? "--json-schema" : "--grammar") +
                      " constrains the sampler chain, which beam search does not use (it ranks the model's own log-probabilities): "
                      "drop it, or drop --beam-width");
  // What BeamSearch itself would refuse, said before a model is read or a trace file opened. (chat's
  // summarize works between turns: within a turn its engine policy is stop.)
  if (opt.context_policy.kind != ContextPolicy::Stop && opt.context_policy.kind != ContextPolicy::Refuse)
    throw ConfigError("--context-policy " + opt.context_policy.to_string() +
                      " drops tokens from one sequence; beam search keeps several: use stop or refuse with --beam-width");
  RunOptions o = opt;
  o.sampler = {PluginSpec{"greedy", {}}};
  return o;
}

StrategyChoice::StrategyChoice(const RunOptions& opt, Session& s)
    : opt_(opt), s_(s), engine_(*s.model, *s.tokenizer, *s.attention, *s.sampler) {
  if (opt.draft_model.empty()) return;
  draft_ = open_draft(opt, s);
  s.header.speculative = SpeculativeSetup{draft_->header.model_path, draft_->header.tokenizer_path, opt.draft_tokens};
  speculative_ = std::make_unique<SpeculativeEngine>(*s.model, *s.tokenizer, *s.attention, *s.sampler,
                                                     DraftModel{*draft_->model, *draft_->attention, *draft_->sampler, draft_->header.model_path},
                                                     opt.draft_tokens);
}

StrategyChoice::~StrategyChoice() = default;

Summary StrategyChoice::generate(std::string_view prompt, const GenerateOptions& g, TraceSink& sinks, const StreamFn& on_piece) {
  if (opt_.beam_width > 0) return beam_search(s_.tokenizer->encode(prompt, s_.tokenizer->add_bos(), false), prompt, g, sinks, on_piece);
  if (speculative_) return speculative_->generate(prompt, g, s_.header, sinks, on_piece);
  return engine_.generate(prompt, g, s_.header, sinks, on_piece);
}

Summary StrategyChoice::generate(std::vector<std::int32_t> ids, std::string_view prompt, const GenerateOptions& g, TraceSink& sinks,
                                 const StreamFn& on_piece) {
  if (opt_.beam_width > 0) return beam_search(std::move(ids), prompt, g, sinks, on_piece);
  if (speculative_) return speculative_->generate(std::move(ids), prompt, g, s_.header, sinks, on_piece);
  return engine_.generate(std::move(ids), prompt, g, s_.header, sinks, on_piece);
}

Summary StrategyChoice::beam_search(std::vector<std::int32_t> ids, std::string_view prompt, const GenerateOptions& g, TraceSink& sinks,
                                    const StreamFn& on_piece) {
  const BeamOptions bo{opt_.beam_width, opt_.length_penalty, opt_.ignore_eos, [] { check_interrupt(); }};
  return glassbox::beam_search(*s_.model, *s_.tokenizer, *s_.attention, *s_.registry, opt_.attention, s_.header.model_path, std::move(ids),
                               prompt, g, bo, s_.header, sinks, on_piece);
}

}  // namespace glassbox::cli
