// Batched decode over the one loop: several sampled generations stepped together, their decode steps sharing
// one forward pass (Transformer::forward_batch), runs joining and leaving between steps (continuous batching).
#pragma once
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <string_view>
#include <vector>

#include "glassbox/prefix_cache.hpp"
#include "glassbox/strategy.hpp"

namespace glassbox {

// Each run keeps its own parts — tokenizer, K/V store, sampler chain (its Transformer, for its prefill and
// its trace's lens, may be batch_model itself) — its options, sink and stream; the decode steps of every run waiting for a
// token go through `batch_model` (over the same weights) as one forward_batch of up to its max_block rows.
// A run's tokens and trace records are those of run_strategy with SampledStrategy alone, bit for bit: only
// the timings differ (a batched step's time is the whole batch's pass). The weights are read once per step
// for the batch, so B sequences decode in about the time of one while decode is memory-bound. After the pass,
// each run's chain and record run on the matrix products' threads, one run per chunk, when every run has a
// Transformer of its own (else one after another, here); sinks and streams must then bear being called
// from those threads (each run's own in order, never two at once).
class SampledBatch {
 public:
  explicit SampledBatch(Transformer& batch_model);
  ~SampledBatch();

  // Opens a run (open_run: checks, header, the chain's reset; the chain is bound to the tokenizer) and
  // returns its id (0, 1, 2, ... in the order added); it is prefilled at the
  // next step(). Throws what run_strategy throws before any step. The batch keeps copies of `opt` and
  // `on_piece`; `parts` and `sink` must outlive the run's last step.
  std::size_t add(const RunParts& parts, std::vector<std::int32_t> ids, std::string_view prompt, const GenerateOptions& opt,
                  RunHeader header, TraceSink& sink, const StreamFn& on_piece);
  // One step of every open run: a new run's prefill, or a decode step (batched with the others').
  // A run that throws ends alone (error(i) keeps what it threw; its summary is not written); the others go
  // on. Returns how many runs are still open.
  std::size_t step();
  // Steps until no run is open.
  void run_all() {
    while (step() > 0) {
    }
  }

  std::size_t open_runs() const;
  // A run by its id (InputError for an unknown one).
  bool open(std::size_t id) const;
  const Summary& summary(std::size_t id) const;        // final once !open(id)
  std::exception_ptr error(std::size_t id) const;       // what the run threw, if it did
  // Drops an ended run and what it held (a server's batch lives longer than its requests); no-op while open.
  void forget(std::size_t id);
  // Prefix reuse: a run's prefill first copies from `cache` the K/V of the longest prefix of its prompt
  // another run left there (the last prompt position is always computed), and a run that finished its
  // prefill leaves its prompt's K/V there. Null (the default): every prompt is prefilled whole. The
  // cache must outlive the batch's steps; several batches may share it.
  void use_prefix_cache(PrefixCache* cache) { cache_ = cache; }
  // Batched forward passes so far and the rows they carried (rows / passes: the mean batch).
  std::int64_t passes() const { return passes_; }
  std::int64_t rows() const { return rows_; }

 private:
  struct Run;
  const Run& find(std::size_t id) const;
  bool prefix_in_flight(std::size_t i) const;
  Transformer& model_;
  std::size_t next_id_ = 0;
  std::vector<std::unique_ptr<Run>> runs_;
  std::vector<BatchRow> batch_;       // (max_block) this step's rows
  std::vector<std::size_t> waiting_;  // (max_block) which run each row belongs to
  std::size_t start_ = 0;              // the run the next step looks at first
  std::int64_t passes_ = 0, rows_ = 0;
  PrefixCache* cache_ = nullptr;
};

}  // namespace glassbox
