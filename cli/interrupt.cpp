// Signal flag for interrupting a run between steps (interrupt.hpp).
#include "interrupt.hpp"

#include <csignal>

namespace glassbox::cli {

namespace {

volatile std::sig_atomic_t g_signal = 0;

extern "C" void on_signal(int sig) {
  if (g_signal != 0) {
    // The second signal: no more waiting for the step to end.
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    return;
  }
  g_signal = sig;
}

}  // namespace

void install_interrupt_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // writes and reads in progress complete; the flag is checked after the step
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

int interrupt_signal() { return g_signal; }

std::string signal_name(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    default: return "signal " + std::to_string(sig);
  }
}

void check_interrupt() {
  if (const int s = g_signal) throw Interrupted(s);
}

}  // namespace glassbox::cli
