// A process-wide interrupt flag: the CLI's SIGINT/SIGTERM handler raises it, and long computations inside
// plugin modules (the grammar stage's walk) read it between units of work and stop. It lives in
// libglassbox so that the command and every module see the same one.
#pragma once

namespace glassbox {

// Async-signal-safe: records `signal` (non-zero).
void raise_interrupt_flag(int signal) noexcept;
// The signal raised, 0: none.
int interrupt_flag() noexcept;
// Lowers it again (tests; a command never does: the first signal ends it).
void clear_interrupt_flag() noexcept;

}  // namespace glassbox
