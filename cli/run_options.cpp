// The run option table and the three things made from it: CLI11 options, the YAML config reader, the docs table.
#include "run_options.hpp"
#include "yaml_input.hpp"

#include <charconv>
#include <climits>
#include <cstdio>
#include <sstream>
#include <stdexcept>

#include <yaml-cpp/yaml.h>

#include "glassbox/error.hpp"
#include "glassbox/file_io.hpp"

namespace glassbox::cli {

namespace {

constexpr unsigned kPipeline = kRun | kChat | kBench | kImport;  // every command that builds a session from these options
constexpr unsigned kGenerate = kRun | kChat;           // ... and generates (bench has its own --threads, a list)
constexpr unsigned kShared = kPipeline | kCompare;     // also in compare's experiments (as text)

std::string scalar(const YAML::Node& n, const std::string& where) {
  if (!n.IsScalar()) throw ConfigError(where + ": expected a single value");
  return n.Scalar();
}

std::string number_text(double v) {
  char buf[32];
  if (v == static_cast<double>(static_cast<long long>(v))) std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
  else std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string range_text(double lo, double hi) {
  return hi >= static_cast<double>(INT_MAX) ? ">= " + number_text(lo) : number_text(lo) + ".." + number_text(hi);
}

PluginSpec yaml_plugin(const YAML::Node& n, const std::string& where, const std::string& kind) {
  if (n.IsScalar()) return parse_plugin_spec(n.Scalar(), kind);
  if (!n.IsMap()) throw ConfigError(where + ": expected NAME, NAME:VALUE or a map with 'name'");
  PluginSpec spec;
  for (const auto& kv : n) {
    const std::string key = scalar(kv.first, where);
    if (key == "name") spec.name = scalar(kv.second, where + ".name");
    else spec.params.emplace_back(key, scalar(kv.second, where + "." + key));
  }
  if (spec.name.empty()) throw ConfigError(where + ": missing 'name'");
  return spec;
}

// A seed: a decimal integer in [0, 2^64 - 1]; "-1" or "1e3" is an error, not a wrapped value.
std::uint64_t parse_seed(const std::string& text, const std::string& where) {
  std::uint64_t v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || text[0] == '-' || text[0] == '+' || ec != std::errc() || p != end)
    throw ConfigError(where + " = '" + text + "' (expected an integer in 0.." + std::to_string(UINT64_MAX) + ")");
  return v;
}

// Runs a core parser, whose messages name the value but not the option it came from.
template <class F>
auto named(const std::string& where, F&& parse) {
  try {
    return parse();
  } catch (const ConfigError& e) {
    throw ConfigError(where + ": " + e.what());
  }
}

// How an entry stores its value: the `set`, `show`, kind and allowed values, filled in by one helper per type.
struct Binding {
  RunOption::Kind kind = RunOption::Kind::Value;
  std::string values;
  std::function<void(RunOptions&, const YAML::Node&, const std::string&)> set;
  std::function<std::string(const RunOptions&)> show;
};

Binding text(std::string RunOptions::*m) {
  return {RunOption::Kind::Value, "",
          [m](RunOptions& o, const YAML::Node& v, const std::string& where) { o.*m = scalar(v, where); },
          [m](const RunOptions& o) { return o.*m; }};
}

Binding integer(int RunOptions::*m, int lo, int hi) {
  const std::string values = range_text(lo, hi);
  return {RunOption::Kind::Value, values,
          [m, lo, hi, values](RunOptions& o, const YAML::Node& v, const std::string& where) {
            const std::string t = scalar(v, where);
            long long x = 0;
            auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), x);
            if (t.empty() || ec != std::errc() || p != t.data() + t.size())
              throw ConfigError(where + " = '" + t + "' (expected an integer, " + values + ")");
            if (x < lo || x > hi) throw ConfigError(where + " = " + t + " (expected " + values + ")");
            o.*m = static_cast<int>(x);
          },
          [m](const RunOptions& o) { return std::to_string(o.*m); }};
}

Binding real(double RunOptions::*m, double lo, double hi) {
  const std::string values = range_text(lo, hi);
  return {RunOption::Kind::Value, values,
          [m, lo, hi, values](RunOptions& o, const YAML::Node& v, const std::string& where) {
            const std::string t = scalar(v, where);
            double x = 0;
            auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), x);
            if (t.empty() || ec != std::errc() || p != t.data() + t.size())
              throw ConfigError(where + " = '" + t + "' (expected a number, " + values + ")");
            if (!(x >= lo && x <= hi)) throw ConfigError(where + " = " + t + " (expected " + values + ")");  // NaN too
            o.*m = x;
          },
          [m](const RunOptions& o) { return number_text(o.*m); }};
}

Binding flag(bool RunOptions::*m) {
  return {RunOption::Kind::Flag, "",
          [m](RunOptions& o, const YAML::Node& v, const std::string& where) {
            bool b = false;
            if (!v.IsScalar() || !YAML::convert<bool>::decode(v, b))
              throw ConfigError(where + " = '" + (v.IsScalar() ? v.Scalar() : std::string("...")) + "' (expected true or false)");
            o.*m = b;
          },
          [m](const RunOptions& o) { return std::string(o.*m ? "true" : "false"); }};
}

// An entry: its words (key, flags, help, ...) and its binding.
RunOption entry(RunOption words, Binding b) {
  words.kind = b.kind;
  if (words.values.empty()) words.values = b.values;
  words.set = std::move(b.set);
  words.show = std::move(b.show);
  return words;
}

std::string join_specs(const std::vector<PluginSpec>& specs) {
  std::string s;
  for (const auto& p : specs) s += (s.empty() ? "" : ",") + p.to_string();
  return s;
}

// Entries name only the fields they use (designated initializers); the rest keep their defaults on purpose.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
// The pipeline's options: the config file, the model, tokenizer and attention, plugin folders, the context
// and its policy, GELU's form, threads.
void add_pipeline_options(std::vector<RunOption>& t) {
  using K = RunOption::Kind;
  // --config is the one option that is not a config key.
  t.push_back(entry({.key = "config", .flags = "--config", .value_name = "FILE",
                     .help = "YAML file setting any of these options by its key (options given here win)",
                     .example = "run.yaml", .commands = kPipeline | kServe, .in_yaml = false},
                    text(&RunOptions::config)));
  t.push_back(entry({.key = "model", .flags = "--model,-m", .value_name = "FILE", .help = "model file: GGUF or llama2.c checkpoint",
                     .default_text = "the embedded toy model", .example = "stories260K.bin", .commands = kShared | kServe},
                    text(&RunOptions::model)));
  t.push_back(entry({.key = "tokenizer", .flags = "--tokenizer,-t", .value_name = "FILE",
                     .help = "tokenizer file or folder; in YAML also a map {name: PLUGIN, path: FILE, PARAM: VALUE}",
                     .default_text = "the one inside a GGUF model, or the embedded model's", .example = "tok512.bin",
                     .commands = kShared | kServe},
                    {K::Value, "",
                     [](RunOptions& o, const YAML::Node& v, const std::string& where) {
                       if (v.IsMap()) {
                         o.tokenizer = yaml_plugin(v, where, "tokenizer");
                         return;
                       }
                       const std::string path = scalar(v, where);
                       if (path.empty()) return;
                       std::erase_if(o.tokenizer.params, [](const auto& p) { return p.first == "path" || p.first.empty(); });
                       o.tokenizer.params.emplace_back("path", path);
                     },
                     [](const RunOptions& o) { return o.tokenizer.to_string(); }}));
  t.push_back(entry({.key = "tokenizer_plugin", .flags = "--tokenizer-plugin", .value_name = "NAME", .help = "tokenizer plugin",
                     .default_text = "the one that accepts the model's tokenizer.ggml.model (llama2c for llama2.c)", .example = "bpe",
                     .commands = kShared},
                    {K::Value, "",
                     [](RunOptions& o, const YAML::Node& v, const std::string& where) {
                       if (auto name = scalar(v, where); !name.empty()) o.tokenizer.name = name;
                     },
                     [](const RunOptions& o) { return o.tokenizer.name; }}));
  t.push_back(entry({.key = "context", .flags = "--context,-c", .value_name = "N",
                     .help = "positions the run may use, at most the model's context length",
                     .default_text = "min(model's, 4096)", .example = "64", .commands = kPipeline | kServe},
                    integer(&RunOptions::context, 1, 1 << 24)));
  t.push_back(entry({.key = "attention", .flags = "--attention", .value_name = "SPEC",
                     .help = "attention plugin, NAME or NAME:VALUE; in YAML also a map with 'name'", .default_text = "kv-cache",
                     .example = "kv-cache:64", .commands = kShared | kServe},
                    {K::Value, "",
                     [](RunOptions& o, const YAML::Node& v, const std::string& where) { o.attention = yaml_plugin(v, where, "attention"); },
                     [](const RunOptions& o) { return o.attention.to_string(); }}));
  t.push_back(entry({.key = "plugin_path", .flags = "--plugin-path", .value_name = "DIR",
                     .help = "extra folder of plugin modules, repeatable; in YAML a list; the command line's add to the config's",
                     .example = "plugins", .commands = kShared | kServe},
                    {K::List, "",
                     [](RunOptions& o, const YAML::Node& v, const std::string& where) {
                       if (!v.IsSequence()) {
                         o.plugin_path.emplace_back(scalar(v, where));
                         return;
                       }
                       for (std::size_t i = 0; i < v.size(); ++i) o.plugin_path.emplace_back(scalar(v[i], where + "[" + std::to_string(i) + "]"));
                     },
                     [](const RunOptions& o) {
                       std::string s;
                       for (const auto& p : o.plugin_path) s += (s.empty() ? "" : ",") + p.string();
                       return s;
                     }}));
  t.push_back(entry({.key = "context_policy", .flags = "--context-policy", .value_name = "POLICY",
                     .help = "when prompt + generation outgrow the context; chat's summarize replaces its oldest exchanges "
                             "with a summary the model writes (docs/attention.md)",
                     .values = "refuse | stop | truncate-left | shift[:n_keep] | summarize (chat)",
                     .default_text = "stop", .example = "shift:4", .commands = kPipeline},
                    {K::Value, "",
                     [](RunOptions& o, const YAML::Node& v, const std::string& where) {
                       const std::string text = scalar(v, where);
                       // summarize is chat's, not the engine's: the engine's policy stays stop under it
                       o.summarize = text == kSummarizePolicy;
                       if (o.summarize) {
                         o.context_policy = ContextPolicy{};
                         return;
                       }
                       if (text.rfind(std::string(kSummarizePolicy) + ":", 0) == 0)
                         throw ConfigError(where + ": context policy '" + text + "': summarize takes no value (--summary-tokens bounds the summary)");
                       try {
                         o.context_policy = parse_context_policy(text);
                       } catch (const ConfigError& e) {
                         throw ConfigError(where + ": " + e.what() + "; chat also takes summarize");
                       }
                     },
                     [](const RunOptions& o) { return o.summarize ? std::string(kSummarizePolicy) : o.context_policy.to_string(); }}));
  t.push_back(entry({.key = "gelu", .flags = "--gelu", .value_name = "FORM",
                     .help = "GELU's form for GELU models (GPT-2, Gemma): the tanh approximation they were trained with, the exact "
                             "erf form, or llama.cpp's fp16 table (closest to its outputs)",
                     .values = "tanh | erf | fp16-table", .default_text = "tanh", .example = "fp16-table", .commands = kPipeline},
                    {K::Value, "",
                     [](RunOptions& o, const YAML::Node& v, const std::string& where) {
                       o.gelu = named(where, [&] { return parse_gelu(scalar(v, where)); });
                     },
                     [](const RunOptions& o) { return std::string(to_string(o.gelu)); }}));
  t.push_back(entry({.key = "threads", .flags = "--threads", .value_name = "N", .help = "threads for the matrix products",
                     .default_text = "one per physical core", .example = "2", .commands = kGenerate | kServe},
                    integer(&RunOptions::threads, 1, 1024)));
}

// What is generated and how each token is chosen: the prompt, the length, the sampler chain, constraints
// (--ignore-eos, a grammar, a JSON schema), beam search, the seed.
void add_generation_options(std::vector<RunOption>& t) {
  using K = RunOption::Kind;
  t.push_back(entry({.key = "prompt", .flags = "--prompt,-p", .value_name = "TEXT",
                     .help = "prompt text; without one, run reads a prompt piped on stdin",
                     .default_text = "empty, start from BOS", .example = "Once upon a time", .commands = kRun},
                    text(&RunOptions::prompt)));
  t.push_back(entry({.key = "max_tokens", .flags = "--max-tokens,-n", .value_name = "N", .help = "tokens to generate at most",
                     .default_text = "256; chat: 64", .example = "8", .commands = kGenerate},
                    integer(&RunOptions::max_tokens, 0, INT_MAX)));
  t.push_back(entry({.key = "sampler", .flags = "--sampler,-s", .value_name = "CHAIN",
                     .help = "sampler chain, e.g. top-k:40,temperature:0.8; in YAML also a list, where a map names any parameter",
                     .default_text = "default", .example = "top-k:40,temperature:0.8", .commands = kGenerate},
                    {K::Value, "",
                     [](RunOptions& o, const YAML::Node& v, const std::string& where) {
                       o.sampler.clear();
                       if (v.IsScalar()) o.sampler = parse_plugin_chain(v.Scalar(), "sampler");
                       else if (v.IsSequence())
                         for (std::size_t i = 0; i < v.size(); ++i) o.sampler.push_back(yaml_plugin(v[i], where + "[" + std::to_string(i) + "]", "sampler"));
                       else o.sampler.push_back(yaml_plugin(v, where, "sampler"));
                     },
                     [](const RunOptions& o) { return join_specs(o.sampler); }}));
  t.push_back(entry({.key = "ignore_eos", .flags = "--ignore-eos",
                     .help = "never end at an end-of-generation token (as llama.cpp's): a logit-bias stage banning each one runs "
                             "first; compare: in every run; bench: the decode test never picks one",
                     .example = "true", .commands = kGenerate | kCompare | kBench},
                    flag(&RunOptions::ignore_eos)));
  t.push_back(entry({.key = "grammar", .flags = "--grammar", .value_name = "FILE",
                     .help = "constrain the output to a GBNF grammar (llama.cpp's format): a grammar stage runs first in the chain",
                     .example = "answer.gbnf", .commands = kGenerate},
                    text(&RunOptions::grammar)));
  t.push_back(entry({.key = "json_schema", .flags = "--json-schema", .value_name = "FILE",
                     .help = "constrain the output to JSON valid under this schema (converted to a grammar; docs/samplers.md lists the subset)",
                     .example = "schema.json", .commands = kGenerate},
                    text(&RunOptions::json_schema)));
  t.push_back(entry({.key = "beam_width", .flags = "--beam-width", .value_name = "N",
                     .help = "beam search: keep the N most likely continuations by total log-probability, each with its own "
                             "K/V rows, instead of sampling (docs/beam-search.md); the sampler chain does not apply",
                     .default_text = "off (sample with the chain)", .example = "4", .commands = kGenerate},
                    integer(&RunOptions::beam_width, 1, 1 << 20)));
  t.push_back(entry({.key = "length_penalty", .flags = "--length-penalty", .value_name = "A",
                     .help = "beam search: a finished hypothesis scores sum_logprob / length^A (Hugging Face's length_penalty; "
                             "A > 0 favours longer ones)",
                     .default_text = "1", .example = "0.5", .commands = kGenerate},
                    real(&RunOptions::length_penalty, -10, 10)));
  t.push_back(entry({.key = "seed", .flags = "--seed", .value_name = "N", .help = "random seed",
                     .values = "0.." + std::to_string(UINT64_MAX), .default_text = "chosen at random, recorded in the trace",
                     .example = "42", .commands = kGenerate},
                    {K::Value, "",
                     [](RunOptions& o, const YAML::Node& v, const std::string& where) { o.seed = parse_seed(scalar(v, where), where); },
                     [](const RunOptions& o) { return o.seed ? std::to_string(*o.seed) : std::string(); }}));
}

// The trace (file, level, encoding, candidates listed), what the terminal shows alongside (--echo,
// --show-probs), and --replay of a trace.
void add_trace_options(std::vector<RunOption>& t) {
  using K = RunOption::Kind;
  t.push_back(entry({.key = "trace", .flags = "--trace", .value_name = "FILE",
                     .help = "write a JSON Lines trace (glassbox.trace/2) to this file", .example = "run.jsonl", .commands = kGenerate},
                    text(&RunOptions::trace)));
  t.push_back(entry({.key = "trace_keep_partial", .flags = "--trace-keep-partial",
                     .help = "let a run cut short (error, SIGINT) replace an existing --trace file",
                     .default_text = "it goes to TRACE.partial", .example = "true", .commands = kGenerate},
                    flag(&RunOptions::trace_keep_partial)));
  t.push_back(entry({.key = "trace_level", .flags = "--trace-level", .value_name = "LEVEL",
                     .help = "what a trace records per step: full adds every logit", .values = "basic | full",
                     .default_text = "basic", .example = "full", .commands = kGenerate},
                    {K::Value, "",
                     [](RunOptions& o, const YAML::Node& v, const std::string& where) { o.trace_level = named(where, [&] { return parse_level(scalar(v, where)); }); },
                     [](const RunOptions& o) { return std::string(o.trace_level == TraceLevel::Full ? "full" : "basic"); }}));
  t.push_back(entry({.key = "trace_logits", .flags = "--trace-logits", .value_name = "ENCODING",
                     .help = "how a full trace writes every logit: base64 of the float32 bytes (exact, cheap) or decimal numbers",
                     .values = "base64 | decimal", .default_text = "base64", .example = "decimal", .commands = kGenerate},
                    {K::Value, "",
                     [](RunOptions& o, const YAML::Node& v, const std::string& where) { o.trace_logits = named(where, [&] { return parse_logits_encoding(scalar(v, where)); }); },
                     [](const RunOptions& o) { return std::string(o.trace_logits == traces::LogitsEncoding::Base64 ? "base64" : "decimal"); }}));
  t.push_back(entry({.key = "trace_top", .flags = "--trace-top", .value_name = "N",
                     .help = "candidates listed per step and per sampler stage", .default_text = "10", .example = "3", .commands = kGenerate},
                    integer(&RunOptions::trace_top, 1, 1000)));
  t.push_back(entry({.key = "echo", .flags = "--echo", .help = "print the prompt before the continuation", .example = "true",
                     .commands = kGenerate},
                    flag(&RunOptions::echo)));
  t.push_back(entry({.key = "show_probs", .flags = "--show-probs", .help = "draw each step's top candidates on stderr",
                     .example = "true", .commands = kGenerate},
                    flag(&RunOptions::show_probs)));
  t.push_back(entry({.key = "replay", .flags = "--replay", .value_name = "TRACE",
                     .help = "teacher-force the tokens chosen in this trace (docs/golden-traces.md)", .example = "golden.jsonl",
                     .commands = kRun},
                    text(&RunOptions::replay)));
}

// Speculative decoding (docs/speculative.md): a draft model proposes, the target verifies.
void add_speculative_options(std::vector<RunOption>& t) {
  t.push_back(entry({.key = "draft_model", .flags = "--draft-model", .value_name = "FILE",
                     .help = "speculative decoding: a small model with the same vocabulary drafts tokens the model verifies "
                             "in one forward; the output is distributed as the model's own",
                     .example = "synth128.bin", .commands = kGenerate | kServe},
                    text(&RunOptions::draft_model)));
  t.push_back(entry({.key = "draft_tokenizer", .flags = "--draft-tokenizer", .value_name = "FILE",
                     .help = "the draft model's tokenizer file (its vocabulary must be the model's)",
                     .default_text = "the one inside a GGUF draft, else --tokenizer's", .example = "tok512.bin", .commands = kGenerate | kServe},
                    text(&RunOptions::draft_tokenizer)));
  t.push_back(entry({.key = "draft_tokens", .flags = "--draft-tokens", .value_name = "K",
                     .help = "tokens the draft proposes per round (with --draft-model)", .default_text = "4", .example = "8",
                     .commands = kGenerate | kServe},
                    integer(&RunOptions::draft_tokens, 1, kMaxDraftTokens)));
}

// chat --context-policy summarize (docs/attention.md): who writes the summary, and how long it may be.
void add_summary_options(std::vector<RunOption>& t) {
  t.push_back(entry({.key = "summary_model", .flags = "--summary-model", .value_name = "FILE",
                     .help = "chat --context-policy summarize: the model that writes the summary of the oldest exchanges "
                             "(any vocabulary: the chat re-encodes its text)",
                     .default_text = "the chat's own model", .example = "stories260K.bin", .commands = kChat},
                    text(&RunOptions::summary_model)));
  t.push_back(entry({.key = "summary_tokenizer", .flags = "--summary-tokenizer", .value_name = "FILE",
                     .help = "the --summary-model's tokenizer file",
                     .default_text = "the one inside a GGUF summary model, else --tokenizer's", .example = "tok512.bin",
                     .commands = kChat},
                    text(&RunOptions::summary_tokenizer)));
  t.push_back(entry({.key = "summary_tokens", .flags = "--summary-tokens", .value_name = "N",
                     .help = "chat --context-policy summarize: the summary's length at most, in the summary model's tokens "
                             "(written greedily)",
                     .default_text = "32, or the room the summary model's context leaves after the request when less (at least 8)",
                     .example = "16", .commands = kChat},
                    integer(&RunOptions::summary_tokens, 1, 4096)));
}

// How the tokens are streamed: --json's lines and their alternatives, the pace.
void add_stream_options(std::vector<RunOption>& t) {
  t.push_back(entry({.key = "json", .flags = "--json",
                     .help = "stdout: one JSON object per token (id, token, logprob, top_logprobs), then a summary object",
                     .example = "true", .commands = kGenerate},
                    flag(&RunOptions::json)));
  t.push_back(entry({.key = "top_logprobs", .flags = "--top-logprobs", .value_name = "N",
                     .help = "alternatives listed per token with --json", .default_text = "5", .example = "2", .commands = kGenerate},
                    integer(&RunOptions::top_logprobs, 0, 1000)));
  t.push_back(entry({.key = "pace", .flags = "--pace", .value_name = "MS",
                     .help = "wait MS milliseconds before each streamed token, for watching", .default_text = "0",
                     .example = "150", .commands = kGenerate | kServe},
                    real(&RunOptions::pace_ms, 0, 60000)));
  t.push_back(entry({.key = "pace_tps", .flags = "--pace-tps", .value_name = "R",
                     .help = "stream at most R tokens per second, for watching; with --pace, the slower wins",
                     .default_text = "0, no limit", .example = "5", .commands = kGenerate},
                    real(&RunOptions::pace_tps, 0, 1e6)));
}

// What the trace records from inside the model: attention weights, the logit lens.
void add_inside_trace_options(std::vector<RunOption>& t) {
  using K = RunOption::Kind;
  t.push_back(entry({.key = "trace_attention", .flags = "--trace-attention", .value_name = "WHICH",
                     .help = "record the newest position's attention weights each step, into the --trace",
                     .values = "LAYER:HEAD | all", .example = "0:1", .commands = kGenerate},
                    {K::Value, "",
                     [](RunOptions& o, const YAML::Node& v, const std::string& where) {
                       o.trace_attention = named(where, [&] { return parse_attention_trace(scalar(v, where)); });
                     },
                     [](const RunOptions& o) {
                       const auto& a = o.trace_attention;
                       if (!a.on) return std::string();
                       return a.layer < 0 ? std::string("all") : std::to_string(a.layer) + ":" + std::to_string(a.head);
                     }}));
  {
    RunOption lens = entry({.key = "trace_lens", .flags = "--trace-lens", .value_name = "[POINTS]",
                            .help = "record the logit lens into the --trace: each step's top tokens after every block "
                                    "(all: also after each block's attention); one output-head product per point and step",
                            .values = "blocks | all", .default_text = "off; blocks when given alone", .example = "all",
                            .commands = kGenerate},
                           {K::Value, "",
                            [](RunOptions& o, const YAML::Node& v, const std::string& where) {
                              o.trace_lens = named(where, [&] { return parse_lens_points(scalar(v, where)); });
                            },
                            [](const RunOptions& o) {
                              return o.trace_lens == LensPoints::Off ? std::string() : o.trace_lens == LensPoints::All ? "all" : "blocks";
                            }});
    lens.value_optional = true;
    t.push_back(std::move(lens));
  }
}

// The table: every group in the order --help, the YAML keys and docs/options.md list them.
std::vector<RunOption> make_table() {
  std::vector<RunOption> t;
  add_pipeline_options(t);
  add_generation_options(t);
  add_trace_options(t);
  add_speculative_options(t);
  add_summary_options(t);
  add_stream_options(t);
  add_inside_trace_options(t);
  return t;
}
#pragma GCC diagnostic pop

// Core parsers (context policy, plugin specs) name the value but not where it came from: add the file and key.
template <class F>
void in_file(const std::string& file, const std::string& key, F&& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    const std::string m = e.what();
    if (m.rfind(file + ":", 0) == 0) throw;
    throw ConfigError(file + ": " + key + ": " + m);
  }
}

}  // namespace

TraceLevel parse_level(const std::string& s) {
  if (s == "basic") return TraceLevel::Basic;
  if (s == "full") return TraceLevel::Full;
  throw ConfigError("trace level '" + s + "' (expected basic or full)");
}

traces::LogitsEncoding parse_logits_encoding(const std::string& s) {
  if (s == "base64") return traces::LogitsEncoding::Base64;
  if (s == "decimal") return traces::LogitsEncoding::Decimal;
  throw ConfigError("logits encoding '" + s + "' (expected base64 or decimal)");
}

std::string RunOption::long_flag() const {
  std::string first = flags.substr(0, flags.find(','));
  return first;
}

std::string RunOption::help_line() const {
  std::string h = help;
  std::string extra = values;
  if (!default_text.empty()) extra += (extra.empty() ? "" : "; ") + std::string("default: ") + default_text;
  if (!extra.empty()) h += " (" + extra + ")";
  return h;
}

const std::vector<RunOption>& run_option_table() {
  static const std::vector<RunOption> table = make_table();
  return table;
}

const RunOption& run_option(const std::string& key) {
  for (const auto& e : run_option_table())
    if (e.key == key) return e;
  throw std::out_of_range("no run option '" + key + "'");
}

void apply_run_config(const YAML::Node& root, const std::string& file, RunOptions& o, std::set<std::string>* keys) {
  if (root.IsNull()) return;
  if (!root.IsMap()) throw ConfigError(file + ": expected a map of option: value");
  std::map<std::string, YAML::Node> given;
  for (const auto& kv : root) {
    if (!kv.first.IsScalar()) throw ConfigError(file + ": expected a map of option: value (a key is not a name)");
    std::string key = kv.first.Scalar();
    for (auto& c : key)
      if (c == '-') c = '_';
    bool known = false;
    for (const auto& e : run_option_table()) known = known || (e.in_yaml && e.key == key);
    if (!known) {
      std::string list;
      for (const auto& e : run_option_table())
        if (e.in_yaml) list += (list.empty() ? "" : ", ") + e.key;
      throw ConfigError(file + ": " + key + ": unknown option (known: " + list + ")");
    }
    if (!given.emplace(key, kv.second).second) throw ConfigError(file + ": " + key + ": given twice");
  }
  for (const auto& e : run_option_table()) {
    const auto it = given.find(e.key);
    if (it == given.end()) continue;
    in_file(file, e.key, [&] { e.set(o, it->second, file + ": " + e.key); });
    if (keys) keys->insert(e.key);
  }
}

RunOptions parse_run_config(const std::string& yaml_text, const std::string& name) {
  const YAML::Node root = parse_yaml_input<ConfigError>(yaml_text, name);
  RunOptions o;
  apply_run_config(root, name, o);
  return o;
}

void load_run_config(const std::string& path, RunOptions& o, std::set<std::string>* keys) {
  if (auto why = not_a_regular_file(path)) throw ConfigError("--config " + path + ": " + *why + " (expected a YAML file)");
  const YAML::Node root = read_yaml_input<ConfigError>(path, "a YAML file");
  apply_run_config(root, path, o, keys);
}

namespace {
CLI::Option* add_entry(CLI::App* cmd, const RunOption& e, std::string& text) {
  return cmd->add_option(e.flags, text, e.help_line())->type_name(e.value_name);
}
}  // namespace

CLI::Option* add_shared_option(CLI::App* cmd, const std::string& key, std::string& target) {
  const RunOption& e = run_option(key);
  return add_entry(cmd, e, target);
}

CLI::Option* add_shared_flag(CLI::App* cmd, const std::string& key, bool& target) {
  const RunOption& e = run_option(key);
  return cmd->add_flag(e.flags, target, e.help_line());
}

CLI::Option* add_shared_option(CLI::App* cmd, const std::string& key, std::vector<std::string>& target) {
  const RunOption& e = run_option(key);
  return cmd->add_option(e.flags, target, e.help_line())->type_name(e.value_name);
}

RunOptionTableBinder::RunOptionTableBinder(CLI::App* cmd, RunCommand command) : cmd_(cmd), command_(command) {
  for (const auto& e : run_option_table()) {
    if (!(e.commands & command)) continue;
    auto s = std::make_unique<Slot>();
    s->entry = &e;
    switch (e.kind) {
      case RunOption::Kind::Flag: s->option = cmd->add_flag(e.flags, s->flag, e.help_line()); break;
      case RunOption::Kind::List: s->option = cmd->add_option(e.flags, s->list, e.help_line())->type_name(e.value_name); break;
      case RunOption::Kind::Value:
        s->option = add_entry(cmd, e, s->text);
        if (e.value_optional) s->option->expected(0, 1);
        break;
    }
    slots_.push_back(std::move(s));
  }
  // llama.cpp's spellings of a sampler's parameter (--temperature 0.7, --top-k 40) are not options here: the
  // chain names them. Registered hidden, so that they get that answer instead of CLI11's "not expected".
  if (command & kGenerate) {
    const std::pair<const char*, const char*> hints[] = {{"--temperature", "temperature"}, {"--temp", "temperature"},
                                                         {"--top-k", "top-k"},             {"--top-p", "top-p"},
                                                         {"--min-p", "min-p"},             {"--typical-p", "typical-p"}};
    for (const auto& [flag, stage] : hints) {
      if (cmd->get_option_no_throw(flag)) continue;
      const std::string f = flag, st = stage;
      cmd->add_option_function<std::string>(
             f,
             [f, st](const std::string& v) {
               throw ConfigError(f + " " + v + ": a sampler's parameter is set in the chain: --sampler " + st + ":" + v +
                                 " (with others: --sampler top-k:40," + st + ":" + v + "; docs/samplers.md)");
             },
             "")
          ->group("");
    }
  }
}

RunOptions RunOptionTableBinder::merge() {
  RunOptions o;
  given_.clear();
  auto node_of = [](const Slot& s) {
    if (s.entry->kind == RunOption::Kind::Flag) return YAML::Node(s.flag ? "true" : "false");
    if (s.entry->kind == RunOption::Kind::Value) return YAML::Node(s.text);
    YAML::Node seq(YAML::NodeType::Sequence);
    for (const auto& v : s.list) seq.push_back(v);
    return seq;
  };
  // --config first: the file's values are the base the command line's are laid over.
  for (const auto& s : slots_)
    if (s->entry->key == "config" && s->option->count() > 0) s->entry->set(o, node_of(*s), s->entry->long_flag());
  if (!o.config.empty()) {
    load_run_config(o.config, o, &given_);
    // A config shared with `run` may set what chat has no use for (a prompt, a golden to replay): said,
    // not silently ignored.
    if (command_ != kRun)
      for (const auto& key : given_)
        if (!(run_option(key).commands & command_))
          std::fprintf(stderr, "glassbox: warning: --config %s: %s is not an option of %s (ignored)\n", o.config.c_str(), key.c_str(),
                       command_name(command_));
  }
  for (const auto& s : slots_) {
    if (s->entry->key == "config" || s->option->count() == 0) continue;
    s->entry->set(o, node_of(*s), s->entry->long_flag());
    given_.insert(s->entry->key);
  }
  // Options that only shape another one's output: said when that output is off, not silently ignored.
  if (given("top_logprobs") && !o.json)
    std::fprintf(stderr, "glassbox: warning: --top-logprobs %d lists alternatives in --json's token lines: without --json it does nothing\n",
                 o.top_logprobs);
  if (given("trace_top") && o.trace.empty() && !o.show_probs)
    std::fprintf(stderr, "glassbox: warning: --trace-top %d sets the candidates a --trace (or --show-probs) lists: with neither it does nothing\n",
                 o.trace_top);
  return o;
}

WatchSpec watch_spec(const RunOptions& o) {
  WatchSpec w;
  w.level = o.trace_level;
  w.top_k = o.json ? std::max(o.trace_top, o.top_logprobs) : o.trace_top;
  w.stages = !o.trace.empty() || o.show_probs;  // per-stage records only when shown
  w.distribution = w.stages || o.json;
  if (!o.trace.empty()) {  // attention rows and the lens go into the trace only
    w.attention = o.trace_attention;
    w.lens = o.trace_lens;
  }
  return w;
}

const char* command_name(RunCommand c) {
  switch (c) {
    case kRun: return "run";
    case kChat: return "chat";
    case kBench: return "bench";
    case kCompare: return "compare";
    case kImport: return "trace import";
    case kServe: return "serve";
  }
  return "?";
}

std::string run_options_markdown() {
  auto cell = [](std::string s) {
    std::string out;
    for (char c : s) out += c == '|' ? std::string("\\|") : std::string(1, c);
    return out;
  };
  std::ostringstream md;
  md << "| option | YAML key | value | default | commands | what it does |\n|---|---|---|---|---|---|\n";
  for (const auto& e : run_option_table()) {
    std::string names;
    std::string rest = e.flags;
    while (!rest.empty()) {
      const auto comma = rest.find(',');
      names += (names.empty() ? "" : ", ") + ("`" + rest.substr(0, comma) + "`");
      rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
    }
    std::string value = e.kind == RunOption::Kind::Flag ? "flag" : e.value_name;
    if (!e.values.empty() && e.kind != RunOption::Kind::Flag) value += ": " + e.values;
    std::string commands;
    for (const RunCommand bit : {kRun, kChat, kBench, kCompare, kImport, kServe})
      if (e.commands & bit) commands += (commands.empty() ? "" : ", ") + std::string(command_name(bit));
    md << "| " << names << " | " << (e.in_yaml ? "`" + e.key + "`" : "—") << " | " << cell(value) << " | "
       << cell(e.default_text) << " | " << commands << " | " << cell(e.help) << " |\n";
  }
  return md.str();
}

}  // namespace glassbox::cli
