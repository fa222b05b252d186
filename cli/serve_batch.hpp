// serve's continuous batching: every slot's generation joins one SampledBatch stepped by a thread of its own,
// so the slots' decode steps share one forward pass (the weights read once per step for all of them).
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "glassbox/batch.hpp"

namespace glassbox::cli {

class BatchLoop {
 public:
  // `rows`: the most runs one pass carries (serve: --parallel). The batch's own activations are over
  // `cfg` and `w`, which must outlive it.
  // `prefix_cache_bytes` > 0: prompts that begin as an earlier one did copy its K/V (PrefixCache).
  BatchLoop(const Config& cfg, const Weights& w, int rows, std::size_t prefix_cache_bytes = 0);
  ~BatchLoop();  // stops the thread; runs still open end with an error
  BatchLoop(const BatchLoop&) = delete;
  BatchLoop& operator=(const BatchLoop&) = delete;

  // Work the calling (HTTP) thread does for a run while it waits: the stream's sends, queued by the batch's
  // thread, which must never wait on a client's socket.
  using Errand = std::function<void()>;
  class Waiter;

  // Runs one sampled generation in the batch and returns its summary once it has ended, or rethrows what it
  // threw (a sink's or the stream's exception: it ends that run alone). `sink` and `on_piece` are called on
  // the batch's thread; on_piece may hand the caller errands (Waiter::post), run here in order as they come.
  // `parts` must be over the batch's model's weights and context.
  Summary generate(const RunParts& parts, std::vector<std::int32_t> ids, std::string_view prompt, const GenerateOptions& opt,
                   RunHeader header, TraceSink& sink, const std::function<void(std::string_view, Waiter&)>& on_piece);

  // Batched passes so far and the rows they carried; runs now in the batch.
  std::int64_t passes() const;
  std::int64_t rows() const;
  int active() const;
  // The prefix cache's figures (all 0 without one).
  PrefixCache::Stats prefix_stats() const { return cache_ ? cache_->stats() : PrefixCache::Stats{}; }

  class Waiter {
   public:
    void post(Errand e);  // from the batch's thread: run e on the waiting thread
   private:
    friend class BatchLoop;
    std::mutex m;
    std::condition_variable cv;
    std::deque<Errand> errands;
    bool done = false;
    Summary sum;
    std::exception_ptr error;
  };

 private:
  struct Pending;
  void loop();
  std::unique_ptr<Transformer> model_;
  std::unique_ptr<PrefixCache> cache_;
  SampledBatch batch_;
  mutable std::mutex m_;
  std::condition_variable cv_;
  std::vector<Pending*> pending_;  // runs waiting to join, added by the loop's thread at its next step
  std::vector<std::pair<std::size_t, Waiter*>> running_;  // (batch id, its waiter)
  bool stop_ = false;
  std::int64_t passes_ = 0, rows_ = 0;
  int active_ = 0;
  std::thread thread_;
};

}  // namespace glassbox::cli
