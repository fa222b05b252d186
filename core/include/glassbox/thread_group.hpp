// Threads a command starts for its own work (compare's and check's workers, bench's triad, serve's
// HTTP pool), joined on every path. A thread the system refuses to start (a process or address-space
// limit) stops the group and becomes a ConfigError naming the option and the count: a joinable
// std::thread destroyed during the exception was std::terminate.
#pragma once
#include <functional>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "glassbox/error.hpp"

namespace glassbox {

class ThreadGroup {
 public:
  // `what`: the option the count came from, for the message ("--jobs 300"). `stop`: tells the threads
  // already started to finish early when a later one cannot start (they are joined before the throw).
  explicit ThreadGroup(std::string what, std::function<void()> stop = {}) : what_(std::move(what)), stop_(std::move(stop)) {}
  ThreadGroup(const ThreadGroup&) = delete;
  ThreadGroup& operator=(const ThreadGroup&) = delete;
  ~ThreadGroup() { join(); }

  template <class F, class... A>
  void start(F&& f, A&&... args) {
    try {
      threads_.emplace_back(std::forward<F>(f), std::forward<A>(args)...);
    } catch (const std::system_error& e) {
      const std::size_t started = threads_.size();
      if (stop_) stop_();
      join();
      throw ConfigError(what_ + ": the system refused to start thread " + std::to_string(started + 1) + " (" + e.code().message() +
                        "); use fewer");
    }
  }

  void join() {
    for (auto& t : threads_)
      if (t.joinable()) t.join();
  }
  std::size_t size() const { return threads_.size(); }

 private:
  std::string what_;
  std::function<void()> stop_;
  std::vector<std::thread> threads_;
};

}  // namespace glassbox
