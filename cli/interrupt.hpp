// SIGINT/SIGTERM during a run: the first one asks the run to stop between steps (its trace then ends in
// an `interrupted` line); a second one ends the process at once, as if no handler were installed.
#pragma once
#include <chrono>
#include <stdexcept>
#include <string>

#include "glassbox/trace_events.hpp"

namespace glassbox::cli {

// Installs the handlers for a command that checks between steps (idempotent): the first signal sets
// the flag, a second one ends the process.
void install_interrupt_handlers();
// Installs them for any other command (main does, for all): a signal removes the temporary files of
// the outputs being written (file_io.hpp's remove_output_temporaries), then ends the process as
// SIGINT/SIGTERM would.
void install_cleanup_handlers();
// Sleeps for `d`, throwing Interrupted as soon as a signal arrives (the pause of --pace).
void sleep_interruptibly(std::chrono::microseconds d);
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

// A sink that stops a run after a step once SIGINT/SIGTERM came (its trace, added before it, has the
// step): the last sink of run's, chat's, compare's and check's runs.
class InterruptSink final : public TraceSink {
 public:
  void header(const RunHeader&) override { check_interrupt(); }
  void step(const StepEvent&) override { check_interrupt(); }
  void summary(const Summary&) override {}
};

}  // namespace glassbox::cli
