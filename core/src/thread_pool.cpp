// The matrix products' thread pool: workers spin briefly for the next job (decode issues one every
// few microseconds), then sleep on the generation counter.
#include "thread_pool.hpp"


#include <algorithm>
#include <string>
#include <system_error>

#include "glassbox/error.hpp"

namespace glassbox::kernels {

namespace {
// About 50 µs of polling before a worker sleeps: long enough to catch the next matmul of a
// decode step, short enough not to burn a core between tokens of an interactive run.
constexpr int kSpins = 20000;
}  // namespace

ThreadPool::ThreadPool(int threads) {
  try {
    workers_.reserve(static_cast<std::size_t>(std::max(threads - 1, 0)));
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker(i); });
  } catch (const std::system_error& e) {
    // The system refused a thread (a process or address-space limit): stop the ones started and say
    // how many were asked for, instead of std::terminate from a joinable std::thread's destructor.
    const std::size_t started = workers_.size();
    stop_.store(true);
    gen_.fetch_add(1, std::memory_order_release);
    gen_.notify_all();
    for (auto& t : workers_) t.join();
    workers_.clear();
    throw ConfigError("--threads " + std::to_string(threads) + ": the system refused to start thread " + std::to_string(started + 2) +
                      " (" + e.code().message() + "); use fewer threads");
  }
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  gen_.fetch_add(1, std::memory_order_release);
  gen_.notify_all();
  for (auto& t : workers_) t.join();
}

// Every access below is sequentially consistent (the default): the argument that a successful claim
// saw this generation's fn/ctx/chunks rests on one total order of these few operations, and they
// cost nothing next to a chunk of a matrix product.
void ThreadPool::work_on(std::uint32_t gen, int slot) {
  const ChunkFn fn = fn_.load();
  const void* ctx = ctx_.load();
  const std::size_t chunks = chunks_.load();
  std::uint64_t c = claim_.load();
  for (;;) {
    // A claim succeeds only while claim_ still carries `gen`. The caller stamps claim_ with the next
    // generation before it rewrites fn/ctx/chunks, so the fields read above belong to this job.
    if (static_cast<std::uint32_t>(c >> 32) != gen) return;
    const std::size_t idx = static_cast<std::uint32_t>(c);
    if (idx >= chunks) return;
    if (!claim_.compare_exchange_weak(c, c + 1)) continue;
    fn(ctx, idx, slot);
    done_.fetch_add(1);
    c = claim_.load();
  }
}

void ThreadPool::take_task() {
  int posted = kPosted;
  if (!task_.compare_exchange_strong(posted, kTaken)) return;  // none, or the caller took it back
  task_fn_(task_ctx_);
  task_.store(kDone, std::memory_order_release);
}

void ThreadPool::worker(int slot) {
  std::uint32_t seen = gen_.load(std::memory_order_acquire);
  while (!stop_.load(std::memory_order_acquire)) {
    std::uint32_t g = gen_.load(std::memory_order_acquire);
    for (int i = 0; g == seen && i < kSpins; ++i) {
      if (task_.load(std::memory_order_relaxed) == kPosted) take_task();
      platform::spin_pause();
      g = gen_.load(std::memory_order_acquire);
    }
    if (g == seen) {
      sleepers_.fetch_add(1);
      if (task_.load() != kPosted) gen_.wait(seen, std::memory_order_acquire);
      sleepers_.fetch_sub(1);
      continue;
    }
    seen = g;
    if (!stop_.load(std::memory_order_acquire)) work_on(g, slot);
  }
}

bool ThreadPool::start_task(TaskFn fn, void* ctx) {
  // Only to a worker that is spinning: waking a sleeping one is a system call on the caller's thread
  // (~40 µs on a virtual machine), more than a task saves. A worker that falls asleep just after this
  // check leaves the task to the caller, which takes it back (finish_task, reclaim_task).
  if (workers_.empty() || sleepers_.load() == static_cast<int>(workers_.size())) return false;
  int none = kNoTask;
  if (!task_.compare_exchange_strong(none, kPosting)) return false;  // one task at a time
  task_fn_ = fn;
  task_ctx_ = ctx;
  task_.store(kPosted);
  return true;
}

bool ThreadPool::reclaim_task() {
  int posted = kPosted;
  return task_.compare_exchange_strong(posted, kNoTask);
}

void ThreadPool::finish_task() {
  if (reclaim_task()) {  // no worker took it: run it here
    task_fn_(task_ctx_);
    return;
  }
  for (int i = 0; task_.load(std::memory_order_acquire) != kDone; ++i) {
    if (i < 4096) platform::spin_pause();
    else std::this_thread::yield();
  }
  task_.store(kNoTask);
}

void ThreadPool::run(std::size_t chunks, ChunkFn fn, const void* ctx) {
  bool expected = false;
  if (workers_.empty() || chunks < 2 || !busy_.compare_exchange_strong(expected, true, std::memory_order_acquire)) {
    for (std::size_t c = 0; c < chunks; ++c) fn(ctx, c, 0);
    return;
  }
  const std::uint32_t gen = gen_.load() + 1;
  claim_.store(static_cast<std::uint64_t>(gen) << 32 | 0xFFFFFFFFu);  // stamp: no claims on the old job, none yet on this one
  fn_.store(fn);
  ctx_.store(ctx);
  chunks_.store(chunks);
  done_.store(0);
  claim_.store(static_cast<std::uint64_t>(gen) << 32);
  gen_.store(gen);
  gen_.notify_all();
  work_on(gen, 0);  // the caller works too, and alone if no worker wakes in time
  // Wait for chunks a worker claimed and is still running; yield so a preempted worker gets the CPU.
  for (int i = 0; done_.load() < chunks; ++i) {
    if (i < 4096) platform::spin_pause();
    else std::this_thread::yield();
  }
  busy_.store(false, std::memory_order_release);
}

}  // namespace glassbox::kernels
