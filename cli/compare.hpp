// The sweep behind `glassbox compare`: the experiment, per-run seeds, parallel runs, metrics and reports
// (docs/compare.md defines every metric).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "glassbox/beam_search.hpp"
#include "glassbox/step_recorder.hpp"
#include "glassbox/trace_events.hpp"

namespace glassbox::cli::compare {

inline constexpr const char* kReportSchema = "glassbox.compare/1";
inline constexpr const char* kShardSchema = "glassbox.compare-shard/1";

struct Strategy {
  std::string label;  // as shown in reports; the chain text when none was given
  std::string chain;  // what `glassbox run --sampler` takes
};

// Everything that decides the runs' results. Two shards belong together when these are equal.
struct Experiment {
  std::string model;                     // empty: the embedded default model
  std::string tokenizer;                 // empty: the embedded default model's
  std::string tokenizer_plugin;          // empty: llama2c
  std::string attention;                 // empty: kv-cache
  std::vector<std::string> plugin_path;
  std::vector<std::string> prompts;
  std::vector<Strategy> strategies;
  int samples = 10;
  std::uint64_t seed = 0;
  int max_tokens = 64;
  // false (default): sample i of every strategy gets the same seed (common random numbers), so that
  // side-by-side samples differ only where the strategies do. true: the strategy index is mixed in too.
  bool independent_seeds = false;
  // As `run --ignore-eos`: every run's chain bans the end-of-generation tokens, so each run goes on to
  // max_tokens (or the end of the context). In the experiment's JSON only when true.
  bool ignore_eos = false;

  long long runs() const { return static_cast<long long>(prompts.size()) * strategies.size() * samples; }
};

nlohmann::json experiment_json(const Experiment& e);
Experiment experiment_from_json(const nlohmann::json& j, const std::string& where);

// "label=CHAIN" or "CHAIN": the text before the first '=' is a label when it holds no ':' or ','.
Strategy parse_strategy(const std::string& text);
// A beam-search strategy instead of a chain: "beam:N" or "beam:width=N;length_penalty=A" (docs/compare.md);
// nullopt for a sampler chain. ConfigError naming the text for a bad width or penalty.
std::optional<BeamOptions> beam_strategy(const std::string& chain);
// A speculative-decoding strategy: "speculative:draft=FILE;k=K;draft_tokenizer=FILE;chain=CHAIN" (docs/compare.md),
// what `run --draft-model FILE --draft-tokens K --sampler CHAIN` does. `chain=` comes last and takes the rest of
// the text (a chain may hold ';'). nullopt for anything else; ConfigError naming the text and the key otherwise.
struct SpeculativeStrategy {
  std::string draft;            // the draft model file
  std::string draft_tokenizer;  // empty: as run (a GGUF draft's own, else the experiment's tokenizer)
  int k = 4;                    // tokens drafted per round
  std::string chain = "greedy"; // the target's (and the draft's) sampler chain
};
std::optional<SpeculativeStrategy> speculative_strategy(const std::string& chain);
// One prompt per line; a line starting with '{' is a JSON object with "prompt", one starting with '"' a
// JSON string (JSONL, for prompts with newlines). Blank lines are skipped.
std::vector<std::string> read_prompts(const std::string& path);
// Overlays a YAML experiment file on `e`; throws ConfigError("FILE: key: what is wrong") for an
// unknown key, a wrong type or a bad value.
void load_experiment(const std::string& path, Experiment& e);
// Every check that can fail before a run: counts, labels, and that every chain builds (with the
// plugins of plugin_path). `where` prefixes messages (the experiment file, or "compare").
// The experiment's own shape (prompts, strategies, samples, max_tokens, the sweep's size); validate adds
// the sampler chains, which need the plugin registry.
void validate_shape(const Experiment& e, const std::string& where);
void validate(const Experiment& e, const std::string& where);

// The seed of one run: splitmix64 folded over (seed, prompt, [strategy,] sample); see docs/compare.md.
std::uint64_t run_seed(const Experiment& e, int prompt, int strategy, int sample);
// The `glassbox run` command line that reproduces one run.
std::string run_command(const Experiment& e, int prompt, int strategy, int sample);

// One run as the metrics need it. Per-step vectors cover every step that chose a token, the
// one that chose the stop token included; `tokens` are the generated tokens (stop token excluded).
struct Run {
  int prompt = 0, strategy = 0, sample = 0;
  std::uint64_t seed = 0;
  std::vector<std::int32_t> tokens;
  std::vector<std::string> pieces;         // text of each generated token (invalid UTF-8 replaced)
  std::string text;                        // the continuation
  std::vector<float> entropy;              // H of the model's distribution, nats
  std::vector<float> chain_entropy;        // H of the distribution the chain drew from (0: argmax)
  std::vector<float> logprob;              // log p(chosen) under the model's distribution
  std::int32_t first = -1;                 // token chosen at step 0 (the stop token too)
  std::string first_text;
  std::vector<std::pair<std::int32_t, float>> first_expected;  // step 0 distribution after the chain (top 10)
  std::vector<std::string> first_expected_text;
  std::string stop_reason;
  std::string trace;                       // trace file written for this run, or empty
  double ms = 0;                           // wall time of the run (not part of any comparison)
  std::int64_t beam_forwards = 0;          // beam strategies: forward passes of the search (0: a sampled run)
  std::int64_t beam_kv_copies = 0;         // beam strategies: beams whose K/V rows were copied
  std::optional<SpeculativeSummary> speculative;  // speculative strategies: the run's round figures
  // Chains with a grammar stage: steps it ran at, and the sums over them of what it removed (candidates,
  // and raw-model probability mass: what entered the stage minus what it kept; docs/compare.md).
  int grammar_steps = 0;
  double grammar_removed = 0, grammar_removed_mass = 0;
};

nlohmann::json run_json(const Run& r);
Run run_from_json(const nlohmann::json& j, const std::string& where, const Experiment& e);  // indexes within e

struct SweepOptions {
  int jobs = 1;                            // worker threads, one session (model mapping) each
  std::optional<std::pair<int, int>> shard;  // (I, N), 1 <= I <= N: runs k with k % N == I - 1
  std::string traces_dir;                  // per-run traces (+ viewer pages) here when not empty
  LensPoints lens = LensPoints::Off;       // with traces_dir: the logit lens in each trace (--trace-lens)
  bool progress = false;                   // progress bar with ETA on stderr
  // Samples of one prompt and one sampled strategy decoded together, up to this many per forward pass
  // (batched decode: the same runs, the weights read once per step for all); 1: one run at a time.
  int batch = 8;
};

// "I/N" -> (I, N); throws ConfigError.
std::pair<int, int> parse_shard(const std::string& text);

// Runs the experiment's runs (all, or the shard's), in parallel; results in sweep order. Sets
// *model_sha256 (when given) to the digest of the model file the runs used.
std::vector<Run> run_sweep(const Experiment& e, const SweepOptions& opt, std::string* model_sha256 = nullptr);

// ---------------------------------------------------------------- the report
// The report (schema glassbox.compare/1, docs/compare.md), typed: make_report fills it, to_json writes the
// versioned JSON, and the Markdown, CSV and HTML writers read these fields. A field's C++ type is its JSON
// number type (an integer stays an integer, a double a double), so that to_json's bytes are the format's.

struct Stat {  // "mean" and "sd" (sample standard deviation; 0 for fewer than two values)
  double mean = 0, sd = 0;
};

// The per-sample metrics (docs/compare.md) as mean ± sd over a cell's or a strategy's samples.
struct SampleStats {
  Stat rep_4, loop, entropy, chain_entropy, logprob, perplexity, length;
};
struct SampleStatField {
  const char* key;  // the JSON key, and the CSV column (with _sd for the spread)
  Stat SampleStats::*stat;
};
inline constexpr SampleStatField kSampleStatFields[] = {
    {"rep_4", &SampleStats::rep_4},       {"loop", &SampleStats::loop},         {"entropy", &SampleStats::entropy},
    {"chain_entropy", &SampleStats::chain_entropy}, {"logprob", &SampleStats::logprob},
    {"perplexity", &SampleStats::perplexity}, {"length", &SampleStats::length}};

// One token chosen at step 0 or in the step-0 distribution after the chain (its top 10).
struct FirstToken {
  std::int32_t id = 0;
  std::string text;
  int count = 0;                   // samples of the cell that chose it
  double freq = 0;                 // count / samples
  std::optional<double> expected;  // its probability after the chain; none (null): not in the top 10
};

// One prompt × strategy.
struct Cell {
  int prompt = 0, strategy = 0, n = 0;  // n: samples
  std::size_t distinct = 0;             // distinct continuations
  double distinct_share = 0, distinct_1 = 0, distinct_2 = 0, distinct_3 = 0;
  SampleStats samples;                  // its keys sit in the cell's object
  std::map<std::string, int> stop_reasons;
  double perplexity_pooled = 0;
  std::vector<FirstToken> first_tokens;  // by expected probability, then count, then id
};

// What only some strategies have: a beam search's cost, speculative decoding's acceptance (pooled over the
// strategy's runs), the mean over a grammar stage's steps of what it removed.
struct BeamFigures {
  int width = 0;
  double length_penalty = 0, forwards_per_step = 0, kv_copies_per_run = 0;
};
struct SpeculativeFigures {
  std::string draft, draft_tokenizer, chain;  // draft_tokenizer: in the JSON only when not empty
  int k = 0;
  long long rounds = 0, draft_forwards = 0, proposed = 0, accepted = 0, tokens = 0;
  double acceptance_rate = 0, tokens_per_target_forward = 0;
};
struct GrammarFigures {
  long long steps = 0;
  double removed_per_step = 0, removed_mass_per_step = 0;
};

// One strategy over every prompt: the diversity metrics as mean ± sd over the prompts, the per-sample ones
// over all its samples.
struct StrategyFigures {
  std::string label, chain;
  int runs = 0;
  Stat distinct, distinct_share, distinct_1, distinct_2, distinct_3;
  SampleStats samples;  // its keys sit in the strategy's object
  std::map<std::string, int> stop_reasons;
  double perplexity_pooled = 0;
  std::optional<BeamFigures> beam;
  std::optional<SpeculativeFigures> speculative;
  std::optional<GrammarFigures> grammar;
};

// A strategy's mean entropies at each step index, over the runs that reached it (`runs` of them), and the
// quartiles of the model's entropy and the median of the chain's there (the report's entropy figure: a median
// with the middle half of the runs as a band, one panel per strategy).
struct StepEntropy {
  int strategy = 0;
  std::vector<double> entropy, chain_entropy;
  std::vector<int> runs;
  std::vector<double> entropy_p25, entropy_median, entropy_p75, chain_entropy_median;
};

// One run as the report lists it: its text and tokens, its own metrics and the command that reproduces it.
struct ReportRun {
  struct Speculative {
    int rounds = 0, proposed = 0, accepted = 0, tokens = 0;
    double acceptance_rate = 0, tokens_per_target_forward = 0;
  };
  struct Grammar {
    int steps = 0;
    double removed_per_step = 0, removed_mass_per_step = 0;
  };
  int prompt = 0, strategy = 0, sample = 0;
  std::uint64_t seed = 0;
  std::string text;
  std::vector<std::int32_t> tokens;
  std::vector<std::string> pieces;
  std::string stop_reason;
  std::size_t length = 0;  // generated tokens
  double rep_4 = 0, loop = 0, entropy = 0, chain_entropy = 0, logprob = 0, perplexity = 0;
  std::int32_t first = -1;
  std::string command, trace;
  std::optional<Speculative> speculative;
  std::optional<Grammar> grammar;
};

struct Report {
  Experiment experiment;
  std::optional<std::string> model_sha256;  // the model file's digest: set by the command, not by make_report
  std::vector<StrategyFigures> strategies;
  std::vector<Cell> cells;           // prompt-major: (p, s) at p * strategies + s
  std::vector<StepEntropy> per_step;
  std::vector<ReportRun> runs;       // sweep order: (p, s, i) at (p * strategies + s) * samples + i
  double wall_s = 0, run_ms = 0;     // "timings": the only fields that are not a function of the experiment
};

// The report's JSON, glassbox.compare/1 (keys sorted, as nlohmann::json writes an object).
nlohmann::json to_json(const Report& r);

// The report: the experiment, per-strategy and per-cell metrics, per-step entropy, the runs.
// `runs` must hold every run of the sweep exactly once (any order); throws ConfigError otherwise.
// Timings go under "timings" only, so that the rest is a pure function of the experiment.
Report make_report(const Experiment& e, std::vector<Run> runs, double wall_s);

// `compare merge`: the report of a sweep from its shard result files (every shard exactly once). Shards are
// untrusted files: parsed through the JSON limits, every field typed by its key path, the experiment bounded
// as a fresh one is, shard indexes within 1..N and run indexes within the sweep. Throws ConfigError.
Report merge_shards(const std::vector<std::string>& files);

// Whether strategy s drew nothing: an argmax at every step of every run (its chain entropy is 0 throughout, or
// a beam search) and one continuation per prompt. Its samples are then one text and their seeds mean nothing:
// the Markdown and the page show it once.
bool argmax_only(const Report& report, int s);

std::string markdown(const Report& report);
std::string csv(const Report& report);
// A self-contained page; trace links are made relative to the folder of `html_path`.
std::string html(const Report& report, const std::string& html_path);

// The report's charts as standalone SVG (the page shows the same ones): `name` is the file stem, `svg` the
// document. Axis ticks are round numbers (1, 2 or 5 × 10^k apart); every strategy is labelled in the chart.
struct Figure {
  std::string name, title, svg;
};
std::vector<Figure> figures(const Report& report);
// `--figures DIR`: each figure as DIR/NAME.svg and DIR/NAME.png (the PNG drawn from the SVG by rsvg-convert,
// Debian's librsvg2-bin, at twice the size). check_figure_tools throws ConfigError naming the package when the
// renderer is missing, so that a sweep is not run for nothing; write_figures returns the files written.
void check_figure_tools();
std::vector<std::string> write_figures(const Report& report, const std::string& dir);
// Round axis ticks covering [lo, hi]: about `target` of them, 1, 2 or 5 × 10^k apart (exposed for tests).
std::vector<double> nice_ticks(double lo, double hi, int target);

// Within-sample metrics, exposed for tests and docs.
double repeated_ngram_share(const std::vector<std::int32_t>& t, int n);  // 1 - unique/total n-grams
int longest_loop(const std::vector<std::int32_t>& t);                     // tokens in the longest repeat

}  // namespace glassbox::cli::compare
