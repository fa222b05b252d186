// glassbox/os.hpp's signal calls on POSIX systems: sigaction for SIGINT/SIGTERM, and the thread's signal mask.
#include <pthread.h>
#include <signal.h>

#include <csignal>
#include <cstring>

#include "glassbox/os.hpp"

namespace glassbox::os {

static_assert(sizeof(sigset_t) <= 128, "InterruptsBlocked keeps the previous mask in 128 bytes");

void handle_interrupts(void (*handler)(int)) {
  struct sigaction sa {};
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // writes and reads in progress complete; the flag is checked after the step
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

void raise_with_default_action(int sig) {
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

InterruptsBlocked::InterruptsBlocked(bool all_stops) {
  sigset_t block, previous;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  sigaddset(&block, SIGTERM);
  if (all_stops) {
    sigaddset(&block, SIGHUP);
    sigaddset(&block, SIGQUIT);
  }
  ::pthread_sigmask(SIG_BLOCK, &block, &previous);
  std::memcpy(previous_, &previous, sizeof previous);
}

InterruptsBlocked::~InterruptsBlocked() {
  sigset_t previous;
  std::memcpy(&previous, previous_, sizeof previous);
  ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
}

}  // namespace glassbox::os
