// Batched decode: several runs of the one loop stepped together, their decode steps in one forward pass.
#include "glassbox/batch.hpp"

#include <algorithm>

#include "glassbox/error.hpp"
#include "thread_pool.hpp"

namespace glassbox {

struct SampledBatch::Run {
  // A run refers to its options and stream (DecodeRun keeps references): the batch keeps them, for as
  // long as the run may step.
  std::size_t id = 0;
  GenerateOptions opt;
  StreamFn on_piece;
  SampledStrategy strategy;
  std::unique_ptr<DecodeRun> run;
  bool open = true;
  bool looked_up = false, remembered = false;  // prefix reuse: done before the prefill, after it
  std::exception_ptr error;
};

SampledBatch::SampledBatch(Transformer& batch_model) : model_(batch_model) {
  batch_.reserve(static_cast<std::size_t>(model_.max_block()));
  waiting_.reserve(static_cast<std::size_t>(model_.max_block()));
}

SampledBatch::~SampledBatch() = default;

std::size_t SampledBatch::add(const RunParts& parts, std::vector<std::int32_t> ids, std::string_view prompt, const GenerateOptions& opt,
                              RunHeader header, TraceSink& sink, const StreamFn& on_piece) {
  if (!parts.chain) throw ConfigError("batched decode runs sampled generations: a run without a sampler chain");
  const Config &a = parts.model.config(), &b = model_.config();
  if (a.dim != b.dim || a.n_layers != b.n_layers || a.vocab_size != b.vocab_size || a.seq_len != b.seq_len)
    throw ConfigError("batched decode: a run's model is not the batch's (its dimensions differ)");
  parts.chain->bind(parts.tok);  // stages that read token texts get the vocabulary (as Engine does)
  auto r = std::make_unique<Run>();
  r->id = next_id_++;
  r->opt = opt;
  r->on_piece = on_piece;
  r->strategy.chunk_prefill(true);  // a long prompt goes in a block per step: the others keep decoding
  r->run = open_run(parts, r->strategy, std::move(ids), prompt, r->opt, std::move(header), sink, r->on_piece);
  r->open = !r->run->closed;
  runs_.push_back(std::move(r));
  return runs_.back()->id;
}

const SampledBatch::Run& SampledBatch::find(std::size_t id) const {
  for (const auto& r : runs_)
    if (r->id == id) return *r;
  throw InputError("batched decode: no run " + std::to_string(id) + " (never added, or forgotten)");
}

bool SampledBatch::open(std::size_t id) const { return find(id).open; }
const Summary& SampledBatch::summary(std::size_t id) const { return find(id).run->sum; }
std::exception_ptr SampledBatch::error(std::size_t id) const { return find(id).error; }

void SampledBatch::forget(std::size_t id) {
  std::erase_if(runs_, [&](const auto& r) { return r->id == id && !r->open; });
}

std::size_t SampledBatch::open_runs() const {
  return static_cast<std::size_t>(std::count_if(runs_.begin(), runs_.end(), [](const auto& r) { return r->open; }));
}

// Whether an earlier run, its prefill begun and not finished, shares more of run i's prompt than the cache
// holds now: run i then waits for it (a step or a few) and copies that prefix rather than computing it too.
// An earlier run always makes progress, so the wait ends.
bool SampledBatch::prefix_in_flight(std::size_t i) const {
  const std::vector<std::int32_t>& seq = runs_[i]->run->seq;
  const int usable = static_cast<int>(seq.size()) - 1;
  const int now = cache_->longest(seq, usable);
  for (std::size_t j = 0; j < i; ++j) {
    const Run& o = *runs_[j];
    if (!o.open || !o.looked_up || o.remembered) continue;
    const std::vector<std::int32_t>& os = o.run->seq;
    const std::size_t limit = std::min({os.size(), seq.size(), static_cast<std::size_t>(std::max(0, usable))});
    const int shared = static_cast<int>(std::mismatch(os.begin(), os.begin() + static_cast<std::ptrdiff_t>(limit), seq.begin()).first - os.begin());
    if (shared >= cache_->min_reuse() && shared > now) return true;
  }
  return false;
}

std::size_t SampledBatch::step() {
  const std::size_t cap = static_cast<std::size_t>(model_.max_block());
  // Each open run's first half: its prefill or a refill runs here whole; a decode step waits for the pass.
  // A full batch leaves the other runs for the next step, which starts with them (round robin).
  batch_.clear();
  waiting_.clear();
  auto fail = [](Run& r) {
    r.error = std::current_exception();
    r.open = false;
  };
  const std::size_t n = runs_.size(), first = n ? start_ % n : 0;
  start_ = 0;
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t i = (first + k) % n;
    Run& r = *runs_[i];
    if (!r.open) continue;
    if (batch_.size() == cap) {  // the rest wait a step; the first of them leads the next one
      start_ = i;
      break;
    }
    if (cache_ && !r.looked_up && prefix_in_flight(i)) continue;  // an earlier run is prefilling more of this prompt
    try {
      DecodeRun& run = *r.run;
      if (cache_ && !r.looked_up) {  // before the prefill's first block: a prefix another run left
        r.looked_up = true;
        const int reused = cache_->restore(run.seq, run.attn, static_cast<int>(run.seq.size()) - 1);
        if (reused > 0) r.strategy.reuse_prefix(run, reused);
      }
      BatchRow row;
      switch (r.strategy.begin_step(run, row)) {
        case SampledStrategy::Step::Ended:
          close_run(run, r.strategy);
          r.open = false;
          break;
        case SampledStrategy::Step::Done:
          if (cache_ && !r.remembered && r.strategy.prefilled()) {  // the prompt's K/V, for the runs after it
            r.remembered = true;
            cache_->remember(run.seq, run.attn, run.model.config().n_layers, run.model.config().kv_dim());  // seq: the prompt
          }
          break;
        case SampledStrategy::Step::Forward:
          batch_.push_back(row);
          waiting_.push_back(i);
          break;
      }
    } catch (...) {
      fail(r);
    }
  }
  // ---- the batched pass: every waiting run's token through the model at once ----
  if (!batch_.empty()) {
    std::span<const float> logits;
    try {
      logits = model_.forward_batch(batch_);
    } catch (...) {
      for (const std::size_t i : waiting_) fail(*runs_[i]);
      waiting_.clear();
    }
    ++passes_;
    rows_ += static_cast<std::int64_t>(batch_.size());
    // ---- each run's second half: its distribution → its chain → its step's record ----
    // Runs are independent there (their own chain, recorder, sink), so with a Transformer each (the lens
    // applies the run's own model's head, on its scratch) they are shared out among the threads: the
    // sampling and the traces' work would otherwise add up, run after run, on this one.
    struct Ends {
      SampledBatch* self;
      std::span<const float> logits;
      std::size_t vocab;
    } ends{this, logits, static_cast<std::size_t>(model_.config().vocab_size)};
    auto end = [](const void* p, std::size_t b, int) {
      const auto& e = *static_cast<const Ends*>(p);
      Run& r = *e.self->runs_[e.self->waiting_[b]];
      try {
        r.strategy.end_step(*r.run, e.logits.subspan(b * e.vocab, e.vocab), e.self->model_.row_attention_dots(b),
                            static_cast<int>(e.self->waiting_.size()));
      } catch (...) {
        r.error = std::current_exception();
        r.open = false;
      }
    };
    bool own_models = waiting_.size() >= 2;
    for (std::size_t b = 0; b < waiting_.size() && own_models; ++b) {
      const Transformer* m = &runs_[waiting_[b]]->run->model;
      own_models = m != &model_;
      for (std::size_t c = 0; c < b && own_models; ++c) own_models = m != &runs_[waiting_[c]]->run->model;
    }
    if (own_models) kernels::pool().run(waiting_.size(), end, &ends);
    else
      for (std::size_t b = 0; b < waiting_.size(); ++b) end(&ends, b, 0);
  }
  return open_runs();
}

}  // namespace glassbox
