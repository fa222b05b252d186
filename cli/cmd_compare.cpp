// `glassbox compare`: prompts × sampler strategies × samples, with diversity and quality metrics
// (Markdown, JSON, CSV, HTML); `--shard I/N` and `compare merge` spread a sweep over machines.
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <thread>

#include "commands.hpp"
#include "seed_option.hpp"
#include "compare.hpp"
#include "glassbox/error.hpp"
#include "glassbox/file_io.hpp"
#include "glassbox/structured_input.hpp"
#include "glassbox/traces/writer.hpp"
#include "interrupt.hpp"
#include "run_options.hpp"

namespace glassbox::cli {

namespace {

using nlohmann::json;
namespace cmp = compare;

struct Output {
  bool json = false, csv = false;
  std::string html, out, figures;
};

void add_output_options(CLI::App* cmd, Output& o) {
  cmd->add_flag("--json", o.json, "print the report as JSON instead of Markdown");
  cmd->add_flag("--csv", o.csv, "print the metrics as CSV instead of Markdown");
  cmd->add_option("--html", o.html, "also write a self-contained HTML report to this file");
  cmd->add_option("-o,--output", o.out, "write what would go to stdout to this file");
  cmd->add_option("--figures", o.figures, "also write each chart as DIR/NAME.svg and DIR/NAME.png (PNG: rsvg-convert, librsvg2-bin)")
      ->type_name("DIR");
}

void write_text(const std::string& path, const std::string& text, const std::string& what) {
  if (path.empty()) {
    std::cout << text;
    std::cout.flush();
    if (!std::cout) throw OutputError("stdout: cannot write the " + what);
    return;
  }
  write_file_atomically(path, text);
}

void emit(const cmp::Report& report, const Output& o) {
  if (o.json && o.csv) throw ConfigError("--json and --csv: choose one");
  const std::string text = o.json ? traces::dump(cmp::to_json(report)) + "\n" : o.csv ? cmp::csv(report) : cmp::markdown(report);
  if (!o.html.empty()) write_text(o.html, cmp::html(report, o.html), "HTML report");
  if (!o.figures.empty())
    for (const auto& f : cmp::write_figures(report, o.figures)) std::cerr << "glassbox: wrote " << f << "\n";
  write_text(o.out, text, "report");
}

}  // namespace

void add_compare_command(CLI::App& app) {
  struct Opts {
    std::string experiment, prompts_file, model, tokenizer, tokenizer_plugin, attention, traces, shard, trace_lens;
    std::vector<std::string> prompts, strategies, plugin_path;
    int samples = 0, max_tokens = 0;
    std::uint64_t seed = 0;
    int jobs = 0;
    int batch = 8;
    bool independent_seeds = false, no_progress = false, ignore_eos = false;
    Output out;
    std::vector<std::string> shard_files;
    Output merge_out;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "compare", "compare sampler strategies over prompts × samples: diversity, repetition, entropy, perplexity");
  cmd->require_subcommand(0, 1);
  cmd->add_option("--experiment,--config", o->experiment, "YAML experiment file (docs/compare.md); options given here win");
  cmd->add_option("--prompt,-p", o->prompts, "a prompt (repeatable)");
  cmd->add_option("--prompts", o->prompts_file, "file of prompts: one per line, or JSON Lines");
  cmd->add_option("--strategy,-s", o->strategies,
                  "sampler chain, beam:N or speculative:draft=FILE;k=K;chain=CHAIN, optionally labelled LABEL=... (repeatable)");
  cmd->add_option("--samples,-N", o->samples, "samples per prompt and strategy (default 10)");
  cmd->add_option("--seed", o->seed, "seed of the sweep (default 0): each run's seed is derived from it")->check(seed_range());
  cmd->add_option("--max-tokens,-n", o->max_tokens, "tokens to generate at most per run (default 64)");
  cmd->add_flag("--independent-seeds", o->independent_seeds,
                "mix the strategy into each run's seed (default: sample i has the same seed in every strategy)");
  // Spelled and explained as `run` spells them (run_options.cpp); the experiment keeps them as text.
  add_shared_option(cmd, "model", o->model);
  add_shared_option(cmd, "tokenizer", o->tokenizer);
  add_shared_option(cmd, "tokenizer_plugin", o->tokenizer_plugin);
  add_shared_option(cmd, "attention", o->attention);
  add_shared_option(cmd, "plugin_path", o->plugin_path);
  add_shared_flag(cmd, "ignore_eos", o->ignore_eos);
  cmd->add_option("--jobs,-j", o->jobs, "parallel runs (default: the number of cores)")->check(CLI::Range(1, 1024));
  cmd->add_option("--batch,-b", o->batch,
                  "samples of one prompt and sampled strategy decoded together, the weights read once per step for all "
                  "(1: one at a time; beam and speculative strategies always are)")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  cmd->add_option("--traces", o->traces, "write each run's trace and viewer page into this folder");
  cmd->add_option("--trace-lens", o->trace_lens, "with --traces: record the logit lens in each trace (blocks | all)")
      ->expected(0, 1)
      ->type_name("[POINTS]");
  cmd->add_option("--shard", o->shard, "run only shard I of N (1 <= I <= N) and write its raw results as JSON");
  cmd->add_flag("--no-progress", o->no_progress, "no progress bar (it is drawn only when stderr is a terminal)");
  add_output_options(cmd, o->out);

  auto* merge = cmd->add_subcommand("merge", "combine the results of `compare --shard` runs into one report");
  merge->add_option("shards", o->shard_files, "shard result files (every shard of one sweep)")->required();
  add_output_options(merge, o->merge_out);

  merge->callback([o] {
    if (!o->merge_out.figures.empty()) cmp::check_figure_tools();
    emit(cmp::merge_shards(o->shard_files), o->merge_out);
  });

  cmd->callback([o, cmd, merge] {
    if (merge->parsed()) return;
    auto given = [&](const char* name) { return cmd->get_option(name)->count() > 0; };
    cmp::Experiment e;
    const std::string where = o->experiment.empty() ? "compare" : o->experiment;
    if (!o->experiment.empty()) cmp::load_experiment(o->experiment, e);
    if (given("--prompts")) e.prompts = cmp::read_prompts(o->prompts_file);
    if (given("--prompt")) {
      if (given("--prompts")) e.prompts.insert(e.prompts.end(), o->prompts.begin(), o->prompts.end());
      else e.prompts = o->prompts;
    }
    if (given("--strategy")) {
      e.strategies.clear();
      for (const auto& s : o->strategies) e.strategies.push_back(cmp::parse_strategy(s));
    }
    if (given("--samples")) e.samples = o->samples;
    if (given("--seed")) e.seed = o->seed;
    if (given("--max-tokens")) e.max_tokens = o->max_tokens;
    if (given("--independent-seeds")) e.independent_seeds = o->independent_seeds;
    if (given("--ignore-eos")) e.ignore_eos = o->ignore_eos;
    if (given("--model")) e.model = o->model;
    if (given("--tokenizer")) e.tokenizer = o->tokenizer;
    if (given("--tokenizer-plugin")) e.tokenizer_plugin = o->tokenizer_plugin;
    if (given("--attention")) e.attention = o->attention;
    if (given("--plugin-path")) e.plugin_path = o->plugin_path;
    cmp::validate(e, where);

    cmp::SweepOptions so;
    so.batch = o->batch;
    so.jobs = o->jobs > 0 ? o->jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    so.traces_dir = o->traces;
    if (cmd->count("--trace-lens") > 0) {
      if (o->traces.empty()) throw ConfigError("--trace-lens records into each run's trace: give --traces DIR");
      so.lens = parse_lens_points(o->trace_lens);
    }
    so.progress = !o->no_progress && ::isatty(STDERR_FILENO);
    if (!o->shard.empty()) {
      so.shard = cmp::parse_shard(o->shard);
      if (o->out.json || o->out.csv || !o->out.html.empty() || !o->out.figures.empty())
        throw ConfigError("--shard writes raw results; make the report with `glassbox compare merge` (no --json, --csv, --html or --figures here)");
    }
    if (!o->out.figures.empty()) cmp::check_figure_tools();  // before the sweep, not after it
    std::string sha;
    const auto t0 = std::chrono::steady_clock::now();
    // SIGINT/SIGTERM during the sweep stop each run after its step (or its grammar walk) and end compare
    // as `run` ends: exit 128 + the signal, no report. Once the runs are done, a signal ends it at once,
    // removing the report's temporary file (interrupt.hpp).
    install_interrupt_handlers();
    auto interrupted = [&](int sig) {
      std::fflush(stdout);
      std::cerr << "\n[glassbox] compare interrupted by " << signal_name(sig) << ": no report\n";
      g_exit_code = 128 + sig;
    };
    std::vector<cmp::Run> runs;
    try {
      runs = cmp::run_sweep(e, so, &sha);
    } catch (const std::exception&) {
      if (const int sig = interrupt_signal()) return interrupted(sig);
      throw;
    }
    install_cleanup_handlers();
    if (const int sig = interrupt_signal()) return interrupted(sig);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (so.shard) {
      json runs_j = json::array();
      for (const auto& r : runs) runs_j.push_back(cmp::run_json(r));
      const json shard = {{"schema", cmp::kShardSchema},
                          {"experiment", cmp::experiment_json(e)},
                          {"model_sha256", sha},
                          {"shard", {{"index", so.shard->first}, {"count", so.shard->second}}},
                          {"runs", runs_j},
                          {"timings", {{"wall_s", wall}}}};
      write_text(o->out.out, traces::dump(shard) + "\n", "shard results");
      return;
    }
    cmp::Report report = cmp::make_report(e, std::move(runs), wall);
    report.model_sha256 = sha;
    emit(report, o->out);
  });
}

}  // namespace glassbox::cli
