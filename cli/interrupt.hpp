// SIGINT/SIGTERM during a run: the first one asks the run to stop between steps (its trace then ends in
// an `interrupted` line); a second one ends the process at once, as if no handler were installed.
#pragma once
#include <stdexcept>
#include <string>

namespace glassbox::cli {

// Installs the handlers (idempotent).
void install_interrupt_handlers();
// The signal received since install (0: none).
int interrupt_signal();
// "SIGINT", "SIGTERM".
std::string signal_name(int sig);

// Thrown between steps once a signal has arrived; not a glassbox::Error (it is no fault of the input).
struct Interrupted : std::runtime_error {
  int signal;
  explicit Interrupted(int sig) : std::runtime_error("interrupted by " + signal_name(sig)), signal(sig) {}
};

// Throws Interrupted when a signal has arrived.
void check_interrupt();

}  // namespace glassbox::cli
