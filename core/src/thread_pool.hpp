// A persistent pool of worker threads for the matrix products: the caller and the workers claim
// chunks of one job from a shared counter, so a worker the OS has not scheduled yet never holds the
// caller up (an OpenMP region waits for every thread at its closing barrier). Internal to libglassbox.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

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
  // Runs fn(ctx, c, slot) for every c in [0, chunks) on the caller and whichever workers are awake,
  // and returns when all have run. Allocates nothing. If another thread is already running a job on
  // this pool, the chunks run on the calling thread alone (slot 0).
  void run(std::size_t chunks, ChunkFn fn, const void* ctx);

 private:
  void worker(int slot);
  void work_on(std::uint32_t gen, int slot);

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
};

// The pool the kernels share, (re)built for kernels::threads() threads (kernels.cpp). The thread
// count must not change while a job runs.
ThreadPool& pool();

}  // namespace glassbox::kernels
