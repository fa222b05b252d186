// Signal flag for interrupting a run between steps (interrupt.hpp).
#include "interrupt.hpp"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <thread>

#include "glassbox/file_io.hpp"
#include "glassbox/interrupt_flag.hpp"
#include "glassbox/os.hpp"

namespace glassbox::cli {

namespace {

volatile std::sig_atomic_t g_signal = 0;
volatile std::sig_atomic_t g_polled = 0;  // the command checks the flag between steps

extern "C" void on_signal(int sig) {
  if (g_signal != 0 || !g_polled) {
    // A command that does not poll, or the second signal: no more waiting. The output files being
    // written are abandoned, so their temporary files go first (file_io.hpp); then the default action.
    glassbox::remove_output_temporaries();
    os::raise_with_default_action(sig);
    return;
  }
  g_signal = sig;
  glassbox::raise_interrupt_flag(sig);  // a long computation inside a module (a grammar walk) sees it too
}

void install(bool polled) {
  g_polled = polled ? 1 : 0;
  // Reads and writes in progress complete (SA_RESTART where there is one); the flag is checked after the step.
  os::handle_interrupts(on_signal);
}

}  // namespace

void install_interrupt_handlers() { install(true); }
void install_cleanup_handlers() { install(false); }

void sleep_interruptibly(std::chrono::microseconds d) {
  // In slices, so that a signal is seen within 20 ms however long the pause (--pace 60000).
  const auto end = std::chrono::steady_clock::now() + d;
  for (;;) {
    check_interrupt();
    const auto now = std::chrono::steady_clock::now();
    if (now >= end) return;
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(end - now, std::chrono::milliseconds(20)));
  }
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
