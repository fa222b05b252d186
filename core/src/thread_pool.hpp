// A persistent pool of worker threads for the matrix products: the caller and the workers claim
// chunks of one job from a shared counter, so a worker the OS has not scheduled yet never holds the
// caller up (an OpenMP region waits for every thread at its closing barrier). Between jobs an idle
// worker can also run one task beside the caller (a trace's raw distribution while the sampler runs).
// Internal to libglassbox.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

#include "platform/cpu.hpp"  // spin_pause

namespace glassbox::kernels {

class ThreadPool {
 public:
  // slot names the thread running the chunk: 0 the caller, 1 .. threads() − 1 the workers, so a job
  // can give each thread scratch of its own (one per slot, not one per chunk).
  using ChunkFn = void (*)(const void* ctx, std::size_t chunk, int slot);
  explicit ThreadPool(int threads);  // threads counts the caller: threads − 1 workers are started
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }
  // Every worker asleep (none has had a job or a task for ~0.4 ms), or none at all.
  bool all_asleep() const { return sleepers_.load() == static_cast<int>(workers_.size()); }
  // Runs fn(ctx, c, slot) for every c in [0, chunks) on the caller and whichever workers are awake,
  // and returns when all have run. Allocates nothing. If another thread is already running a job on
  // this pool, the chunks run on the calling thread alone (slot 0).
  void run(std::size_t chunks, ChunkFn fn, const void* ctx);

  // fn(ctx) on a worker while the caller goes on: hands it over and returns true, or returns false
  // (no worker, every worker asleep, or a task already out) and the caller runs it itself. A worker
  // spinning between jobs takes it at once; no system call is made. fn must not throw. Every
  // start_task that returned true is followed by one finish_task (or a reclaim_task that returned true).
  using TaskFn = void (*)(void* ctx) noexcept;
  bool start_task(TaskFn fn, void* ctx);
  // Returns when the task has run: on the worker that took it, or here if none has taken it yet.
  void finish_task();
  // True when no worker had taken the task: it is the caller's again, to run itself (no finish_task).
  bool reclaim_task();

 private:
  void worker(int slot);
  void work_on(std::uint32_t gen, int slot);
  void take_task();

  std::vector<std::thread> workers_;
  std::atomic<bool> busy_{false};
  std::atomic<bool> stop_{false};
  // The job: (generation << 32 | next chunk) claimed by compare-and-swap, so a worker that read an
  // older job's generation can claim nothing from a newer one.
  std::atomic<std::uint32_t> gen_{0};
  std::atomic<std::uint64_t> claim_{0};
  std::atomic<std::size_t> done_{0};
  std::atomic<std::size_t> chunks_{0};
  std::atomic<ChunkFn> fn_{nullptr};
  std::atomic<const void*> ctx_{nullptr};
  // The task beside the caller: kNoTask -> kPosting -> kPosted (start_task) -> kTaken (a worker) -> kDone
  // -> kNoTask (finish_task), or kPosted -> kNoTask when the caller takes it back.
  enum : int { kNoTask, kPosting, kPosted, kTaken, kDone };
  std::atomic<int> task_{kNoTask};
  std::atomic<int> sleepers_{0};  // workers asleep on gen_ (or about to be)
  TaskFn task_fn_ = nullptr;  // written before task_ becomes kPosted, read after it is taken
  void* task_ctx_ = nullptr;
};

// The pool the kernels share, (re)built for kernels::threads() threads (kernels.cpp). The thread
// count must not change while a job or a task runs.
ThreadPool& pool();

// A task beside the caller on pool() (start_task), or run here when no worker can take it; the
// destructor (or wait()) returns once it has run, so what it reads and writes outlives it.
class Beside {
 public:
  Beside(ThreadPool::TaskFn fn, void* ctx) : fn_(fn), ctx_(ctx), pool_(&pool()) {
    if (!pool_->start_task(fn, ctx)) {
      pool_ = nullptr;
      fn(ctx);
    }
  }
  ~Beside() { wait(); }
  Beside(const Beside&) = delete;
  Beside& operator=(const Beside&) = delete;
  void wait() {
    if (pool_) pool_->finish_task();
    pool_ = nullptr;
  }
  // Returns once the task has set `ready` (part of its work is done) or has run: a task no worker
  // has taken yet is taken back and run here.
  void wait_until(const std::atomic<bool>& ready) {
    if (!pool_) return;
    if (pool_->reclaim_task()) {
      pool_ = nullptr;
      fn_(ctx_);
      return;
    }
    for (int i = 0; !ready.load(std::memory_order_acquire); ++i) {
      if (i < 4096) platform::spin_pause();
      else std::this_thread::yield();
    }
  }

 private:
  ThreadPool::TaskFn fn_;
  void* ctx_;
  ThreadPool* pool_;  // null once the task has run (or ran here)
};

}  // namespace glassbox::kernels
