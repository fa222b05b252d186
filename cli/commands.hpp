// The subcommands of `glassbox`; each adds itself to the app. main.cpp lists them.
#pragma once
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

namespace glassbox::cli {

// A command that wants a non-zero exit status without an error (e.g. "regression found") sets it.
extern int g_exit_code;

// Whether the text streamed to stdout so far (a continuation, a chat reply) ends mid-line: main() then
// starts an error on a new line. note_streamed() is called with each piece written.
extern bool g_stdout_mid_line;
inline void note_streamed(std::string_view piece) {
  if (!piece.empty()) g_stdout_mid_line = piece.back() != '\n';
}

void add_run_command(CLI::App& app);
void add_tokenize_command(CLI::App& app);
void add_plugins_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_trace_command(CLI::App& app);
// `trace import` (trace_import.cpp): other engines' logits as a glassbox trace.
void add_trace_import(CLI::App* trace);
// `plugins --graph` (cmd_trace.cpp): adds its options; the returned function draws the pipeline and
// returns true when --graph was given, else returns false.
std::function<bool(const std::vector<std::string>& plugin_path)> add_plugins_graph_options(CLI::App* plugins);
void add_explain_command(CLI::App& app);
void add_compare_command(CLI::App& app);
void add_convert_command(CLI::App& app);
void add_inspect_command(CLI::App& app);
void add_synth_command(CLI::App& app);
void add_chat_command(CLI::App& app);
void add_serve_command(CLI::App& app);
// `check SUITE.yaml` (cmd_check.cpp): a suite of golden cases for CI.
void add_check_command(CLI::App& app);

}  // namespace glassbox::cli
