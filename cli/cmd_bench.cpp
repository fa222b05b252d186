// `glassbox bench`: measured prefill and decode throughput of a model (median of repeated runs).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "glassbox/error.hpp"
#include "session.hpp"

namespace glassbox::cli {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

namespace {
template <class O>
bool cmd_given(const O& o) {
  return o.cmd->get_option("--prompt-tokens")->count() > 0 || o.cmd->get_option("--gen-tokens")->count() > 0;
}
}  // namespace

void add_bench_command(CLI::App& app) {
  struct Opts {
    int prompt_tokens = 128, gen_tokens = 128, repeat = 5;
    bool json = false;
    CLI::App* cmd = nullptr;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("bench", "measure prefill and decode speed (tokens/s, median of --repeat runs)");
  auto binder = std::make_shared<RunOptionsBinder>(cmd, false);
  o->cmd = cmd;
  cmd->add_option("--prompt-tokens", o->prompt_tokens, "prompt length in tokens (default 128)")->check(CLI::PositiveNumber);
  cmd->add_option("--gen-tokens", o->gen_tokens, "tokens to decode (default 128)")->check(CLI::PositiveNumber);
  cmd->add_option("--repeat", o->repeat, "runs; the median is reported (default 5)")->check(CLI::PositiveNumber);
  cmd->add_flag("--json", o->json, "print the figures as JSON");
  cmd->callback([o, binder] {
    RunOptions opt = binder->finish();
    opt.sampler = {{"greedy", {}}};
    auto s = open_session(opt);
    const Config& c = s->model->config();
    // Defaults that do not fit a small model's context shrink to it (half prompt, half generation).
    const bool sizes_given = cmd_given(*o);
    if (!sizes_given && static_cast<long long>(o->prompt_tokens) + o->gen_tokens > c.seq_len) o->prompt_tokens = o->gen_tokens = c.seq_len / 2;
    if (static_cast<long long>(o->prompt_tokens) + o->gen_tokens > c.seq_len)
      throw ConfigError("--prompt-tokens + --gen-tokens = " + std::to_string(static_cast<long long>(o->prompt_tokens) + o->gen_tokens) +
                        " exceeds the model's context of " + std::to_string(c.seq_len));
    // A fixed, reproducible prompt: BOS then ids spread over the vocabulary.
    std::vector<std::int32_t> prompt{s->tokenizer->bos_id()};
    for (int i = 1; i < o->prompt_tokens; ++i) prompt.push_back(3 + (i * 7919) % (c.vocab_size - 3));

    std::vector<double> prefill_block, prefill_single, decode;
    Transformer single(s->config, s->source->weights(), 1);  // the same model, one position per call
    for (int r = 0; r < o->repeat; ++r) {
      // PREFILL in blocks (matrix x matrix), as the engine does
      s->attention->clear();
      auto t0 = Clock::now();
      std::span<const float> logits;
      for (int p = 0; p < o->prompt_tokens; p += s->model->max_block()) {
        const int n = std::min(s->model->max_block(), o->prompt_tokens - p);
        logits = s->model->forward(std::span(prompt).subspan(p, n), p, *s->attention);
      }
      prefill_block.push_back(o->prompt_tokens / seconds_since(t0));
      // DECODE: one token per step, greedy
      t0 = Clock::now();
      int pos = o->prompt_tokens - 1;
      for (int g = 0; g < o->gen_tokens; ++g) {
        std::int32_t next = static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
        logits = s->model->forward(std::span(&next, 1), ++pos, *s->attention);
      }
      decode.push_back(o->gen_tokens / seconds_since(t0));
      // The same prompt one position at a time (what prefill would cost without blocks)
      s->attention->clear();
      t0 = Clock::now();
      for (int p = 0; p < o->prompt_tokens; ++p) single.forward(std::span(prompt).subspan(p, 1), p, *s->attention);
      prefill_single.push_back(o->prompt_tokens / seconds_since(t0));
    }
    const KvUsage kv = s->attention->usage();
    nlohmann::json j = {{"model", s->header.model_path},
                        {"params", static_cast<double>(s->source->weights().parameter_count())},
                        {"weight_types", s->header.weight_types},
                        {"prompt_tokens", o->prompt_tokens},
                        {"gen_tokens", o->gen_tokens},
                        {"repeat", o->repeat},
                        {"prefill_tok_s", median(prefill_block)},
                        {"prefill_one_by_one_tok_s", median(prefill_single)},
                        {"decode_tok_s", median(decode)},
                        {"decode_ms_per_token", 1000.0 / median(decode)},
                        {"kv_bytes", kv.bytes}};
    if (o->json) {
      std::cout << j.dump(2) << "\n";
      return;
    }
    std::printf("model            %s (dim %d, %d layers, vocab %d; %s)\n", s->header.model_path.c_str(), c.dim, c.n_layers,
                c.vocab_size, s->header.weight_types.c_str());
    std::printf("prefill          %10.0f tok/s  (%d tokens in blocks of %d, median of %d)\n", median(prefill_block),
                o->prompt_tokens, s->model->max_block(), o->repeat);
    std::printf("prefill 1-by-1   %10.0f tok/s  (the same prompt, one position per forward)\n", median(prefill_single));
    std::printf("decode           %10.0f tok/s  (%.3f ms/token over %d tokens)\n", median(decode), 1000.0 / median(decode),
                o->gen_tokens);
    std::printf("kv cache         %10lld bytes allocated\n", static_cast<long long>(kv.bytes));
  });
}

}  // namespace glassbox::cli
