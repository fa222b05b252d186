// The process-wide interrupt flag (interrupt_flag.hpp).
#include "glassbox/interrupt_flag.hpp"

#include <atomic>

namespace glassbox {

namespace {
std::atomic<int> g_flag{0};  // lock-free on every target: safe to store from a signal handler
static_assert(std::atomic<int>::is_always_lock_free);
}  // namespace

void raise_interrupt_flag(int signal) noexcept { g_flag.store(signal, std::memory_order_relaxed); }
int interrupt_flag() noexcept { return g_flag.load(std::memory_order_relaxed); }
void clear_interrupt_flag() noexcept { g_flag.store(0, std::memory_order_relaxed); }

}  // namespace glassbox
