// The subcommands of `glassbox`; each adds itself to the app. main.cpp lists them.
#pragma once
#include <CLI/CLI.hpp>

namespace glassbox::cli {

// A command that wants a non-zero exit status without an error (e.g. "regression found") sets it.
extern int g_exit_code;

void add_run_command(CLI::App& app);
void add_tokenize_command(CLI::App& app);
void add_plugins_command(CLI::App& app);
void add_bench_command(CLI::App& app);

}  // namespace glassbox::cli
