// glassbox's entry point: parses the command line, runs a subcommand, and maps errors to exit codes.
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "commands.hpp"
#include "interrupt.hpp"
#include "glassbox/error.hpp"
#include "glassbox/file_io.hpp"

namespace glassbox::cli {
int g_exit_code = 0;
bool g_stdout_mid_line = false;
}

int main(int argc, char** argv) {
  using namespace glassbox::cli;
  // Past a file size limit, write() then fails with EFBIG (an error naming the file) instead of a kill.
  std::signal(SIGXFSZ, SIG_IGN);
  // SIGINT/SIGTERM remove the temporary files of outputs being written before the process ends; run and
  // chat then switch to stopping between steps (interrupt.hpp).
  install_cleanup_handlers();
  // One command is one process: every file it reads is an input no output of it may replace (file_io.hpp).
  glassbox::record_inputs(true);
  CLI::App app{"glassbox: LLM inference in which every step is visible"};
  app.set_version_flag("--version", GLASSBOX_VERSION);
  app.require_subcommand(1);
  add_run_command(app);
  add_tokenize_command(app);
  add_plugins_command(app);
  add_bench_command(app);
  add_trace_command(app);
  add_explain_command(app);
  add_compare_command(app);
  add_convert_command(app);
  add_inspect_command(app);
  add_synth_command(app);
  add_chat_command(app);
  add_serve_command(app);
  add_check_command(app);
  // CLI11 reports an unknown command as "A subcommand is required": name it instead.
  if (argc > 1 && argv[1][0] != '-') {
    std::string known;
    bool found = false;
    for (const auto* c : app.get_subcommands({})) {
      known += (known.empty() ? "" : ", ") + c->get_name();
      found = found || c->get_name() == argv[1];
    }
    if (!found) {
      std::cerr << "glassbox: error: unknown command '" << argv[1] << "' (commands: " << known << ")\n";
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::cerr << "glassbox: error: " << e.what() << " (see --help)\n";
    return 2;
  } catch (const glassbox::Error& e) {
    std::fflush(stdout);
    if (g_stdout_mid_line) std::cerr << "\n";  // off the streamed text's line
    if (const int sig = interrupt_signal()) {
      // A module's long computation stopped for the signal (a grammar walk while a chain is built, before
      // the command polls between steps): the command was interrupted, not given bad input.
      std::cerr << "glassbox: interrupted by " << signal_name(sig) << " (" << e.what() << ")\n";
      return 128 + sig;
    }
    std::cerr << "glassbox: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    if (g_stdout_mid_line) std::cerr << "\n";
    std::cerr << "glassbox: internal error: " << e.what() << "\n";
    return 3;
  }
  // Output that never reached stdout (a full disk, a closed descriptor) is an error, not a success.
  errno = 0;
  std::cout.flush();
  if (std::fflush(stdout) != 0 || std::ferror(stdout) || std::cout.fail()) {
    std::cerr << "glassbox: error: stdout: write failed" << (errno ? std::string(": ") + std::strerror(errno) : std::string()) << "\n";
    return 2;
  }
  return g_exit_code;
}
