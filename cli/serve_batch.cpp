// serve's continuous batching: requests join and leave one SampledBatch between its steps.
#include "serve_batch.hpp"

#include "glassbox/error.hpp"

namespace glassbox::cli {

struct BatchLoop::Pending {
  const RunParts* parts;
  std::vector<std::int32_t> ids;
  std::string_view prompt;
  const GenerateOptions* opt;
  RunHeader header;
  TraceSink* sink;
  StreamFn on_piece;
  Waiter* waiter;
};

BatchLoop::BatchLoop(const Config& cfg, const Weights& w, int rows, std::size_t prefix_cache_bytes)
    : model_(std::make_unique<Transformer>(cfg, w, rows)),
      // a shared prefix is worth a copy from 2 positions on (more than a BOS alone)
      cache_(prefix_cache_bytes ? std::make_unique<PrefixCache>(prefix_cache_bytes, 2) : nullptr),
      batch_(*model_) {
  batch_.use_prefix_cache(cache_.get());
  thread_ = std::thread([this] { loop(); });
}

BatchLoop::~BatchLoop() {
  {
    std::lock_guard lock(m_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void BatchLoop::Waiter::post(Errand e) {
  {
    std::lock_guard lock(m);
    errands.push_back(std::move(e));
  }
  cv.notify_one();
}

Summary BatchLoop::generate(const RunParts& parts, std::vector<std::int32_t> ids, std::string_view prompt, const GenerateOptions& opt,
                            RunHeader header, TraceSink& sink, const std::function<void(std::string_view, Waiter&)>& on_piece) {
  Waiter w;
  Pending p{&parts, std::move(ids), prompt, &opt, std::move(header), &sink, [&on_piece, &w](std::string_view piece) { on_piece(piece, w); },
            &w};
  {
    std::lock_guard lock(m_);
    if (stop_) throw Error("the server is stopping");
    pending_.push_back(&p);
  }
  cv_.notify_all();
  // Wait for the end, running the errands the batch's thread hands over (in order) meanwhile.
  std::unique_lock lock(w.m);
  for (;;) {
    w.cv.wait(lock, [&] { return w.done || !w.errands.empty(); });
    while (!w.errands.empty()) {
      Errand e = std::move(w.errands.front());
      w.errands.pop_front();
      lock.unlock();
      e();
      lock.lock();
    }
    if (w.done && w.errands.empty()) break;
  }
  if (w.error) std::rethrow_exception(w.error);
  return w.sum;
}

void BatchLoop::loop() {
  for (;;) {
    std::vector<Pending*> joining;
    {
      std::unique_lock lock(m_);
      cv_.wait(lock, [&] { return stop_ || !pending_.empty() || !running_.empty(); });
      if (stop_) break;
      joining.swap(pending_);
    }
    // ---- runs join between steps: open_run's checks, header and chain reset, here ----
    for (Pending* p : joining) {
      try {
        const std::size_t id = batch_.add(*p->parts, std::move(p->ids), p->prompt, *p->opt, std::move(p->header), *p->sink, p->on_piece);
        running_.emplace_back(id, p->waiter);
      } catch (...) {
        std::lock_guard lock(p->waiter->m);
        p->waiter->error = std::current_exception();
        p->waiter->done = true;
        p->waiter->cv.notify_one();
      }
    }
    // ---- one step of every run: a newcomer's prefill, the others' decode in one pass ----
    batch_.step();
    // ---- runs leave: each waiter gets its summary or its error ----
    std::erase_if(running_, [&](const std::pair<std::size_t, Waiter*>& r) {
      if (batch_.open(r.first)) return false;
      Waiter& w = *r.second;
      {
        std::lock_guard lock(w.m);
        w.error = batch_.error(r.first);
        w.sum = batch_.summary(r.first);
        w.done = true;
      }
      w.cv.notify_one();
      batch_.forget(r.first);
      return true;
    });
    std::lock_guard lock(m_);
    passes_ = batch_.passes();
    rows_ = batch_.rows();
    active_ = static_cast<int>(running_.size());
  }
  // Stopping: every run still in the batch, or waiting to join, ends with an error.
  std::lock_guard lock(m_);
  auto end = [](Waiter& w) {
    std::lock_guard wl(w.m);
    w.error = std::make_exception_ptr(Error("the server is stopping"));
    w.done = true;
    w.cv.notify_one();
  };
  for (auto& r : running_) end(*r.second);
  for (Pending* p : pending_) end(*p->waiter);
  running_.clear();
  pending_.clear();
}

std::int64_t BatchLoop::passes() const {
  std::lock_guard lock(m_);
  return passes_;
}
std::int64_t BatchLoop::rows() const {
  std::lock_guard lock(m_);
  return rows_;
}
int BatchLoop::active() const {
  std::lock_guard lock(m_);
  return active_;
}

}  // namespace glassbox::cli
