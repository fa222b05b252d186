// glassbox's entry point: parses the command line, runs a subcommand, and maps errors to exit codes.
#include <cstdio>
#include <iostream>

#include "commands.hpp"
#include "glassbox/error.hpp"

namespace glassbox::cli {
int g_exit_code = 0;
}

int main(int argc, char** argv) {
  using namespace glassbox::cli;
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
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::cerr << "glassbox: error: " << e.what() << " (see --help)\n";
    return 2;
  } catch (const glassbox::Error& e) {
    std::fflush(stdout);
    std::cerr << "\nglassbox: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::cerr << "\nglassbox: internal error: " << e.what() << "\n";
    return 3;
  }
  return g_exit_code;
}
