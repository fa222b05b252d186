// `glassbox compare`'s sweep: experiment files, per-run seeds, runs on worker threads (one session
// each), the metrics of docs/compare.md, and the Markdown / CSV renderings of the report.
#include "compare.hpp"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <array>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include <yaml-cpp/yaml.h>

#include "glassbox/batch.hpp"
#include "glassbox/beam_search.hpp"
#include "glassbox/engine.hpp"
#include "glassbox/error.hpp"
#include "glassbox/file_io.hpp"
#include "glassbox/structured_input.hpp"
#include "glassbox/thread_group.hpp"
#include "glassbox/pipeline.hpp"
#include "interrupt.hpp"
#include "glassbox/registry.hpp"
#include "glassbox/rng.hpp"
#include "glassbox/speculative.hpp"
#include "glassbox/traces/html.hpp"
#include "glassbox/traces/reader.hpp"
#include "glassbox/traces/token_text.hpp"
#include "glassbox/traces/writer.hpp"
#include "session.hpp"
#include "yaml_input.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace glassbox::cli::compare {

namespace {

// More runs than this is a typo, not a sweep (each run keeps its tokens in memory).
constexpr long long kMaxRuns = 10'000'000;
constexpr int kExpectedTop = 10;  // candidates of the step-0 distribution kept per run

std::string quote_shell(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=,+@%") ==
                        std::string::npos)
    return s;
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// A string as JSON will carry it: invalid UTF-8 replaced, so that memory and a shard file agree.
std::string clean_utf8(const std::string& s) {
  for (unsigned char c : s)
    if (c >= 0x80) return json::parse(traces::dump(json(s))).get<std::string>();
  return s;
}

}  // namespace

// ---------------------------------------------------------------- the experiment

json experiment_json(const Experiment& e) {
  json strategies = json::array();
  for (const auto& s : e.strategies) strategies.push_back({{"label", s.label}, {"chain", s.chain}});
  json j = {{"model", e.model},
          {"tokenizer", e.tokenizer},
          {"tokenizer_plugin", e.tokenizer_plugin},
          {"attention", e.attention},
          {"plugin_path", e.plugin_path},
          {"prompts", e.prompts},
          {"strategies", strategies},
          {"samples", e.samples},
          {"seed", e.seed},
          {"max_tokens", e.max_tokens},
          {"independent_seeds", e.independent_seeds}};
  // Only when set: an experiment without it reads, and writes, as it did before the key existed.
  if (e.ignore_eos) j["ignore_eos"] = true;
  return j;
}

// Shards are read back from files a user may have edited: every field is typed and ranged, by its key
// path (structured_input.hpp), and the sweep's size is bounded as a fresh experiment's is (validate_shape).
Experiment experiment_from_json(const json& j, const std::string& where) {
  const JsonIn<ConfigError> in(j, where, "experiment");
  Experiment e;
  e.model = in.at("model").get<std::string>();
  e.tokenizer = in.at("tokenizer").get<std::string>();
  e.tokenizer_plugin = in.at("tokenizer_plugin").get<std::string>();
  e.attention = in.at("attention").get<std::string>();
  in.at("plugin_path").each([&](const JsonIn<ConfigError>& x) { e.plugin_path.push_back(x.get<std::string>()); });
  in.at("prompts").each([&](const JsonIn<ConfigError>& x) { e.prompts.push_back(x.get<std::string>()); });
  in.at("strategies").each([&](const JsonIn<ConfigError>& x) {
    e.strategies.push_back({x.at("label").get<std::string>(), x.at("chain").get<std::string>()});
  });
  e.samples = in.at("samples").get<int>(1, kMaxRuns);
  e.seed = in.at("seed").get<std::uint64_t>();
  e.max_tokens = in.at("max_tokens").get<int>(1);
  e.independent_seeds = in.at("independent_seeds").get<bool>();
  if (in.has("ignore_eos")) e.ignore_eos = in.at("ignore_eos").get<bool>();
  validate_shape(e, where);
  return e;
}

Strategy parse_strategy(const std::string& text) {
  const auto eq = text.find('=');
  if (eq != std::string::npos && eq > 0) {
    const std::string label = text.substr(0, eq);
    if (label.find_first_of(":,") == std::string::npos) return {label, text.substr(eq + 1)};
  }
  return {text, text};
}

std::optional<BeamOptions> beam_strategy(const std::string& chain) {
  if (chain != "beam" && chain.rfind("beam:", 0) != 0) return std::nullopt;
  BeamOptions b;
  b.width = 0;
  const std::string rest = chain.size() > 5 ? chain.substr(5) : "";
  std::size_t at = 0;
  while (at <= rest.size() && !rest.empty()) {
    const std::size_t end = std::min(rest.find(';', at), rest.size());
    const std::string item = rest.substr(at, end - at);
    const auto eq = item.find('=');
    const std::string key = eq == std::string::npos ? "width" : item.substr(0, eq);
    const std::string value = eq == std::string::npos ? item : item.substr(eq + 1);
    char* stop = nullptr;
    errno = 0;
    if (key == "width") {
      const long w = std::strtol(value.c_str(), &stop, 10);
      if (value.empty() || *stop || errno || w < 1 || w > (1 << 20))
        throw ConfigError("strategy '" + chain + "': width '" + value + "' (expected an integer >= 1)");
      b.width = static_cast<int>(w);
    } else if (key == "length_penalty") {
      const double a = std::strtod(value.c_str(), &stop);
      if (value.empty() || *stop || !std::isfinite(a) || a < -10 || a > 10)
        throw ConfigError("strategy '" + chain + "': length_penalty '" + value + "' (expected a number in -10..10)");
      b.length_penalty = a;
    } else {
      throw ConfigError("strategy '" + chain + "': unknown parameter '" + key + "' (beam takes width and length_penalty)");
    }
    at = end + 1;
  }
  if (b.width == 0) throw ConfigError("strategy '" + chain + "': beam needs a width (beam:N or beam:width=N)");
  return b;
}

std::optional<SpeculativeStrategy> speculative_strategy(const std::string& chain) {
  if (chain != "speculative" && chain.rfind("speculative:", 0) != 0) return std::nullopt;
  SpeculativeStrategy sp;
  bool has_chain = false;
  const std::string rest = chain.size() > 12 ? chain.substr(12) : "";
  std::size_t at = 0;
  while (at < rest.size()) {
    // chain= takes the rest of the text: a chain's stages may hold ';' (repetition-penalty:penalty=1.3;last_n=32).
    if (rest.compare(at, 6, "chain=") == 0) {
      sp.chain = rest.substr(at + 6);
      has_chain = true;
      break;
    }
    const std::size_t end = std::min(rest.find(';', at), rest.size());
    const std::string item = rest.substr(at, end - at);
    at = end + 1;
    const auto eq = item.find('=');
    if (eq == std::string::npos)
      throw ConfigError("strategy '" + chain + "': '" + item + "' is not KEY=VALUE (speculative takes draft, k, draft_tokenizer and chain)");
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (key == "draft" || key == "draft_model") {
      if (value.empty()) throw ConfigError("strategy '" + chain + "': draft is empty (expected the draft model's file)");
      sp.draft = value;
    } else if (key == "draft_tokenizer") {
      if (value.empty()) throw ConfigError("strategy '" + chain + "': draft_tokenizer is empty (expected a tokenizer file)");
      sp.draft_tokenizer = value;
    } else if (key == "k" || key == "draft_tokens") {
      char* stop = nullptr;
      errno = 0;
      const long k = std::strtol(value.c_str(), &stop, 10);
      if (value.empty() || *stop || errno || k < 1 || k > kMaxDraftTokens)
        throw ConfigError("strategy '" + chain + "': k '" + value + "' (expected an integer in 1.." + std::to_string(kMaxDraftTokens) + ")");
      sp.k = static_cast<int>(k);
    } else {
      throw ConfigError("strategy '" + chain + "': unknown parameter '" + key +
                        "' (speculative takes draft, k, draft_tokenizer and chain)");
    }
  }
  if (sp.draft.empty())
    throw ConfigError("strategy '" + chain + "': speculative needs a draft model (speculative:draft=FILE;k=K;chain=CHAIN)");
  if (has_chain && sp.chain.empty()) throw ConfigError("strategy '" + chain + "': chain is empty (expected a sampler chain, e.g. greedy)");
  if (beam_strategy(sp.chain) || speculative_strategy(sp.chain))
    throw ConfigError("strategy '" + chain + "': chain '" + sp.chain + "' is a strategy of its own, not a sampler chain");
  return sp;
}

std::vector<std::string> read_prompts(const std::string& path) {
  if (auto why = not_a_regular_file(path)) throw ConfigError(path + ": " + *why + " (expected a prompts file)");
  std::ifstream in(path);
  if (!in) throw ConfigError(path + ": cannot read prompts file");
  std::vector<std::string> out;
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    const char c = line[line.find_first_not_of(" \t")];
    if (c != '{' && c != '"') {
      out.push_back(line);
      continue;
    }
    const std::string where = path + ":" + std::to_string(n);
    json j;
    try {
      j = parse_json_input<ConfigError>(line, where);
    } catch (const ConfigError& e) {
      throw ConfigError(std::string(e.what()) + "; a line starting like JSON must be a JSON string or {\"prompt\": ...}");
    }
    if (j.is_string()) out.push_back(j.get<std::string>());
    else if (j.is_object() && j.contains("prompt") && j["prompt"].is_string()) out.push_back(j["prompt"].get<std::string>());
    else throw ConfigError(where + ": expected a JSON string or an object with a string \"prompt\"");
  }
  return out;
}

void load_experiment(const std::string& path, Experiment& e) {
  const YAML::Node root = read_yaml_input<ConfigError>(path, "a YAML experiment file");
  if (!root.IsMap()) throw ConfigError(path + ": expected a map of key: value (prompts, strategies, samples, ...)");
  auto scalar = [&](const YAML::Node& n, const std::string& key) {
    if (!n.IsScalar()) throw ConfigError(path + ": " + key + ": expected a single value");
    return n.as<std::string>();
  };
  auto list = [&](const YAML::Node& n, const std::string& key) {
    std::vector<std::string> v;
    if (n.IsScalar()) v.push_back(n.as<std::string>());
    else if (n.IsSequence())
      for (std::size_t i = 0; i < n.size(); ++i) v.push_back(scalar(n[i], key + "[" + std::to_string(i) + "]"));
    else if (!n.IsNull()) throw ConfigError(path + ": " + key + ": expected a list of values");
    return v;
  };
  std::string current;
  std::set<std::string> seen;  // yaml-cpp keeps a repeated key: the second would silently win
  try {
    for (const auto& kv : root) {
      if (!kv.first.IsScalar())
        throw ConfigError(path + ":" + std::to_string(kv.first.Mark().line + 1) + ": a key that is not a text (expected model, prompts, strategies, ...)");
      std::string key = kv.first.as<std::string>();
      for (auto& c : key)
        if (c == '-') c = '_';
      current = key;
      if (!seen.insert(key).second)
        throw ConfigError(path + ":" + std::to_string(kv.first.Mark().line + 1) + ": key '" + kv.first.as<std::string>() +
                          "' given twice (each key once)");
      const YAML::Node& v = kv.second;
      if (key == "model") e.model = scalar(v, key);
      else if (key == "tokenizer") e.tokenizer = scalar(v, key);
      else if (key == "tokenizer_plugin") e.tokenizer_plugin = scalar(v, key);
      else if (key == "attention") e.attention = scalar(v, key);
      else if (key == "plugin_path") e.plugin_path = list(v, key);
      else if (key == "prompts") e.prompts = list(v, key);
      else if (key == "prompts_file") e.prompts = read_prompts(scalar(v, key));
      else if (key == "strategies") {
        e.strategies.clear();
        if (v.IsSequence()) {
          for (std::size_t i = 0; i < v.size(); ++i) {
            const std::string where = key + "[" + std::to_string(i) + "]";
            if (v[i].IsScalar()) {
              e.strategies.push_back(parse_strategy(v[i].as<std::string>()));
            } else if (v[i].IsMap()) {
              Strategy s;
              for (const auto& f : v[i]) {
                const auto name = f.first.as<std::string>();
                if (name == "label") s.label = scalar(f.second, where + ".label");
                else if (name == "chain") s.chain = scalar(f.second, where + ".chain");
                else throw ConfigError(path + ": " + where + ": unknown key '" + name + "' (known: label, chain)");
              }
              if (s.chain.empty()) throw ConfigError(path + ": " + where + ": missing 'chain'");
              if (s.label.empty()) s.label = s.chain;
              e.strategies.push_back(s);
            } else {
              throw ConfigError(path + ": " + where + ": expected CHAIN, LABEL=CHAIN or {label, chain}");
            }
          }
        } else if (v.IsMap()) {  // label: chain, in file order
          for (const auto& f : v) e.strategies.push_back({f.first.as<std::string>(), scalar(f.second, key + "." + f.first.as<std::string>())});
        } else if (!v.IsNull()) {
          throw ConfigError(path + ": strategies: expected a list of sampler chains");
        }
      } else if (key == "samples") e.samples = v.as<int>();
      else if (key == "seed") {
        // (yaml-cpp's as<uint64_t> reads "-1" as 2^64-1 and wraps 2^64: parsed here, as --seed is)
        const std::string t = scalar(v, key);
        std::uint64_t x = 0;
        auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), x);
        if (t.empty() || t[0] == '-' || t[0] == '+' || ec != std::errc() || p != t.data() + t.size())
          throw ConfigError(path + ": seed = '" + t + "' (expected an integer in 0.." + std::to_string(UINT64_MAX) + ")");
        e.seed = x;
      }
      else if (key == "max_tokens") e.max_tokens = v.as<int>();
      else if (key == "independent_seeds") e.independent_seeds = v.as<bool>();
      else if (key == "ignore_eos") e.ignore_eos = v.as<bool>();
      else
        throw ConfigError(path + ": unknown key '" + kv.first.as<std::string>() +
                          "' (known: model, tokenizer, tokenizer_plugin, attention, plugin_path, prompts, prompts_file, "
                          "strategies, samples, seed, max_tokens, independent_seeds, ignore_eos)");
    }
  } catch (const YAML::BadConversion& x) {
    throw ConfigError(path + ": " + current + " (line " + std::to_string(x.mark.line + 1) + "): value has the wrong type");
  }
}

void validate_shape(const Experiment& e, const std::string& where) {
  if (e.prompts.empty()) throw ConfigError(where + ": no prompts (give --prompt, --prompts FILE or 'prompts:')");
  if (e.strategies.empty())
    throw ConfigError(where + ": strategies: the list is empty (give --strategy CHAIN or 'strategies:')");
  if (e.samples < 1) throw ConfigError(where + ": samples = " + std::to_string(e.samples) + " (expected >= 1)");
  if (e.max_tokens < 1) throw ConfigError(where + ": max_tokens = " + std::to_string(e.max_tokens) + " (expected >= 1)");
  if (e.runs() > kMaxRuns)
    throw ConfigError(where + ": " + std::to_string(e.runs()) + " runs (prompts × strategies × samples); at most " +
                      std::to_string(kMaxRuns) + " — split the sweep");
  std::set<std::string> labels;
  for (const auto& s : e.strategies)
    if (!labels.insert(s.label).second) throw ConfigError(where + ": strategies: label '" + s.label + "' is used twice");
}

void validate(const Experiment& e, const std::string& where) {
  validate_shape(e, where);
  Registry reg;
  reg.load_default(std::vector<fs::path>(e.plugin_path.begin(), e.plugin_path.end()));
  for (std::size_t i = 0; i < e.strategies.size(); ++i) {
    const auto& s = e.strategies[i];
    try {
      if (s.chain.empty()) throw ConfigError("empty sampler chain");
      if (beam_strategy(s.chain)) continue;  // checked as it parses; its width against the vocabulary when it runs
      std::string chain = s.chain;
      if (const auto sp = speculative_strategy(s.chain)) {
        // The files are checked here, before any run; the vocabularies and the chain's selecting stage when
        // the workers open the draft (as `run --draft-model` does).
        auto check_file = [](const std::string& key, const std::string& path, const char* what) {
          std::error_code ec;
          if (!fs::exists(path, ec)) throw ConfigError(key + " '" + path + "': no such file (expected " + what + ")");
          if (auto why = not_a_regular_file(path)) throw ConfigError(key + " '" + path + "': " + *why + " (expected " + what + ")");
        };
        check_file("draft", sp->draft, "the draft model's file");
        if (!sp->draft_tokenizer.empty()) check_file("draft_tokenizer", sp->draft_tokenizer, "a tokenizer file");
        chain = sp->chain;
      }
      std::vector<std::string> warnings;
      build_sampler_stages(reg, parse_plugin_chain(chain, "sampler"), warnings);
      for (const auto& w : warnings) warn("strategy '" + s.label + "': " + w);
    } catch (const Error& x) {
      throw ConfigError(where + ": strategies[" + std::to_string(i) + "] '" + s.label + "': " + x.what());
    }
  }
}

// ---------------------------------------------------------------- seeds and commands

std::uint64_t run_seed(const Experiment& e, int prompt, int strategy, int sample) {
  // h = sm(seed); h = sm(h ^ prompt); [h = sm(h ^ strategy);] h = sm(h ^ sample), with sm one
  // splitmix64 step: every input bit reaches every output bit, so neighbouring runs are unrelated.
  std::uint64_t x = e.seed;
  std::uint64_t h = Rng::splitmix64(x);
  auto fold = [&](std::uint64_t v) {
    x = h ^ v;
    h = Rng::splitmix64(x);
  };
  fold(static_cast<std::uint64_t>(prompt));
  if (e.independent_seeds) fold(static_cast<std::uint64_t>(strategy));
  fold(static_cast<std::uint64_t>(sample));
  return h;
}

std::string run_command(const Experiment& e, int prompt, int strategy, int sample) {
  std::string c = "glassbox run";
  if (!e.model.empty()) c += " --model " + quote_shell(e.model);
  if (!e.tokenizer.empty()) c += " --tokenizer " + quote_shell(e.tokenizer);
  if (!e.tokenizer_plugin.empty()) c += " --tokenizer-plugin " + quote_shell(e.tokenizer_plugin);
  if (!e.attention.empty()) c += " --attention " + quote_shell(e.attention);
  for (const auto& p : e.plugin_path) c += " --plugin-path " + quote_shell(p);
  c += " --prompt " + quote_shell(e.prompts[prompt]);
  if (const auto b = beam_strategy(e.strategies[strategy].chain)) {
    std::ostringstream a;
    a << b->length_penalty;
    c += " --beam-width " + std::to_string(b->width) + " --length-penalty " + a.str();
  } else if (const auto sp = speculative_strategy(e.strategies[strategy].chain)) {
    c += " --draft-model " + quote_shell(sp->draft);
    if (!sp->draft_tokenizer.empty()) c += " --draft-tokenizer " + quote_shell(sp->draft_tokenizer);
    c += " --draft-tokens " + std::to_string(sp->k) + " --sampler " + quote_shell(sp->chain);
  } else {
    c += " --sampler " + quote_shell(e.strategies[strategy].chain);
  }
  c += " --seed " + std::to_string(run_seed(e, prompt, strategy, sample));
  c += " --max-tokens " + std::to_string(e.max_tokens);
  if (e.ignore_eos) c += " --ignore-eos";
  return c;
}

// ---------------------------------------------------------------- runs

json run_json(const Run& r) {
  // Per-step floats as their exact double value: read back, they give the same float bit for bit.
  auto floats = [](const std::vector<float>& v) {
    json a = json::array();
    for (float f : v) a.push_back(static_cast<double>(f));
    return a;
  };
  json expected = json::array();
  for (std::size_t i = 0; i < r.first_expected.size(); ++i)
    expected.push_back({{"id", r.first_expected[i].first},
                        {"text", r.first_expected_text[i]},
                        {"prob", static_cast<double>(r.first_expected[i].second)}});
  json j = {{"prompt", r.prompt},
          {"strategy", r.strategy},
          {"sample", r.sample},
          {"seed", r.seed},
          {"tokens", r.tokens},
          {"pieces", r.pieces},
          {"text", r.text},
          {"entropy", floats(r.entropy)},
          {"chain_entropy", floats(r.chain_entropy)},
          {"logprob", floats(r.logprob)},
          {"first", {{"id", r.first}, {"text", r.first_text}}},
          {"first_expected", expected},
          {"stop_reason", r.stop_reason},
          {"trace", r.trace},
          {"ms", r.ms}};
  if (r.beam_forwards > 0) {
    j["beam_forwards"] = r.beam_forwards;
    j["beam_kv_copies"] = r.beam_kv_copies;
  }
  if (r.speculative)
    j["speculative"] = {{"k", r.speculative->k},
                        {"rounds", r.speculative->rounds},
                        {"draft_forwards", r.speculative->draft_forwards},
                        {"proposed", r.speculative->proposed},
                        {"accepted", r.speculative->accepted},
                        {"tokens", r.speculative->tokens}};
  if (r.grammar_steps > 0)
    j["grammar"] = {{"steps", r.grammar_steps}, {"removed", r.grammar_removed}, {"removed_mass", r.grammar_removed_mass}};
  return j;
}

Run run_from_json(const json& j, const std::string& where, const Experiment& e) {
  const JsonIn<ConfigError> in(j, where, "run");
  Run r;
  r.prompt = in.at("prompt").get<int>(0, static_cast<long double>(e.prompts.size()) - 1);
  r.strategy = in.at("strategy").get<int>(0, static_cast<long double>(e.strategies.size()) - 1);
  r.sample = in.at("sample").get<int>(0, e.samples - 1);
  r.seed = in.at("seed").get<std::uint64_t>();
  in.at("tokens").each([&](const JsonIn<ConfigError>& x) { r.tokens.push_back(x.get<std::int32_t>(0)); });
  in.at("pieces").each([&](const JsonIn<ConfigError>& x) { r.pieces.push_back(x.get<std::string>()); });
  r.text = in.at("text").get<std::string>();
  auto floats = [&](const char* key) {
    std::vector<float> v;
    in.at(key).each([&](const JsonIn<ConfigError>& x) { v.push_back(x.get<float>()); });
    return v;
  };
  r.entropy = floats("entropy");
  r.chain_entropy = floats("chain_entropy");
  r.logprob = floats("logprob");
  r.first = in.at("first").at("id").get<std::int32_t>(0);
  r.first_text = in.at("first").at("text").get<std::string>();
  in.at("first_expected").each([&](const JsonIn<ConfigError>& x) {
    r.first_expected.emplace_back(x.at("id").get<std::int32_t>(0), x.at("prob").get<float>(0, 1));
    r.first_expected_text.push_back(x.at("text").get<std::string>());
  });
  r.stop_reason = in.at("stop_reason").get<std::string>();
  r.trace = in.at("trace").get<std::string>();
  r.ms = in.at("ms").get<double>(0);
  if (in.has("beam_forwards")) {
    r.beam_forwards = in.at("beam_forwards").get<std::int64_t>(1);
    r.beam_kv_copies = in.at("beam_kv_copies").get<std::int64_t>(0);
  }
  if (in.has("speculative")) {
    const auto sp = in.at("speculative");
    SpeculativeSummary x;
    x.k = sp.at("k").get<int>(1, kMaxDraftTokens);
    x.rounds = sp.at("rounds").get<int>(0);
    x.draft_forwards = sp.at("draft_forwards").get<int>(0);
    x.proposed = sp.at("proposed").get<int>(0);
    x.accepted = sp.at("accepted").get<int>(0, x.proposed);
    x.tokens = sp.at("tokens").get<int>(0);
    r.speculative = x;
  }
  if (in.has("grammar")) {
    const auto g = in.at("grammar");
    r.grammar_steps = g.at("steps").get<int>(1, static_cast<long double>(e.max_tokens) + 1);
    r.grammar_removed = g.at("removed").get<double>(0);
    r.grammar_removed_mass = g.at("removed_mass").get<double>(0, 1.001 * r.grammar_steps);  // <= 1 a step, float rounding aside
  }
  if (r.entropy.empty() || r.entropy.size() != r.chain_entropy.size() || r.entropy.size() != r.logprob.size() ||
      r.pieces.size() != r.tokens.size() || static_cast<long long>(r.tokens.size()) > e.max_tokens)
    in.fail("per-step arrays of different lengths, empty, or longer than max_tokens");
  return r;
}

std::pair<int, int> parse_shard(const std::string& text) {
  const auto slash = text.find('/');
  int i = 0, n = 0;
  try {
    std::size_t a = 0, b = 0;
    if (slash == std::string::npos) throw std::invalid_argument("no /");
    i = std::stoi(text.substr(0, slash), &a);
    n = std::stoi(text.substr(slash + 1), &b);
    if (a != slash || b != text.size() - slash - 1) throw std::invalid_argument("trailing");
  } catch (const std::logic_error&) {
    throw ConfigError("--shard '" + text + "' (expected I/N, e.g. 2/8)");
  }
  if (n < 1 || i < 1 || i > n) throw ConfigError("--shard '" + text + "' (expected 1 <= I <= N)");
  return {i, n};
}

namespace {

// Collects what the metrics need from a run's events.
class Collector final : public TraceSink {
 public:
  Collector(Run& r, const Tokenizer& tok) : r_(r), tok_(tok) {}
  void header(const RunHeader& h) override { vocab_ = h.config.vocab_size; }
  void step(const StepEvent& e) override {
    // What a grammar stage removed: what entered it (the previous stage's record, or the whole
    // vocabulary and mass 1 when it runs first) minus what it kept, in raw-model probability mass.
    for (std::size_t i = 0; i < e.stages.size(); ++i) {
      if (e.stages[i].name != "grammar") continue;
      const double in_mass = i == 0 ? 1.0 : static_cast<double>(e.stages[i - 1].mass);
      const int in_kept = i == 0 ? vocab_ : e.stages[i - 1].kept;
      r_.grammar_removed_mass += std::max(0.0, in_mass - static_cast<double>(e.stages[i].mass));
      r_.grammar_removed += std::max(0, in_kept - e.stages[i].kept);
      ++r_.grammar_steps;
      break;  // one grammar stage is counted (a chain has one)
    }
    r_.entropy.push_back(e.entropy);
    r_.logprob.push_back(e.logprob);
    // The distribution drawn from is the selecting stage's (the last recorded); an argmax draws
    // from a point mass.
    const bool drawn = e.draw_u >= 0 && !e.stages.empty();
    r_.chain_entropy.push_back(drawn ? e.stages.back().entropy : 0.0f);
    tokens_.push_back(e.token);
    pieces_.emplace_back(e.token_text);
    if (e.step == 0) {
      r_.first = e.token;
      r_.first_text = clean_utf8(std::string(e.token_text));
      const std::int32_t prev = e.input_ids.empty() ? -1 : e.input_ids.back();
      if (drawn) {
        for (const auto& t : e.stages.back().top) {
          r_.first_expected.emplace_back(t.id, t.prob);
          r_.first_expected_text.push_back(clean_utf8(std::string(tok_.decode(prev, t.id))));
        }
      } else {
        r_.first_expected.emplace_back(e.token, 1.0f);
        r_.first_expected_text.push_back(r_.first_text);
      }
    }
  }
  void summary(const Summary& s) override {
    r_.stop_reason = s.stop_reason;
    if (s.beam) r_.beam_forwards = s.beam->forwards, r_.beam_kv_copies = s.beam->kv_copies;
    if (s.speculative) r_.speculative = s.speculative;
    const auto n = static_cast<std::size_t>(s.generated);
    tokens_.resize(std::min(n, tokens_.size()));
    pieces_.resize(tokens_.size());
    r_.tokens = tokens_;
    for (const auto& p : pieces_) r_.pieces.push_back(clean_utf8(p));
  }

 private:
  Run& r_;
  const Tokenizer& tok_;
  int vocab_ = 0;
  std::vector<std::int32_t> tokens_;
  std::vector<std::string> pieces_;
};

// One worker's pipeline: a session and, per strategy, its chain, engine and trace header.
struct Worker {
  std::unique_ptr<Session> session;
  std::vector<std::unique_ptr<SamplerChain>> chains;
  std::vector<std::unique_ptr<Engine>> engines;
  std::vector<RunHeader> headers;
  std::vector<std::optional<BeamOptions>> beams;      // per strategy: a beam search instead of the chain
  std::vector<std::unique_ptr<KvStore>> beam_stores;  // the widest beam strategy's stores beyond the session's
  std::vector<std::unique_ptr<Session>> drafts;       // per strategy: a speculative strategy's draft (else null)
  std::vector<std::unique_ptr<SpeculativeEngine>> speculative;  // per strategy: its engine (else null)
  // Batched samples (SweepOptions::batch): rows beyond the first (which uses the session's model, store and
  // chain) each get a Transformer, a store and, per strategy, a chain of their own, made on first use.
  std::unique_ptr<Transformer> batch_model;
  std::vector<std::unique_ptr<Transformer>> row_models;
  std::vector<std::unique_ptr<KvStore>> row_stores;
  std::vector<std::vector<std::unique_ptr<SamplerChain>>> row_chains;  // (strategy, row - 1)
};

RunOptions session_options(const Experiment& e) {
  RunOptions o;
  o.model = e.model;
  if (!e.tokenizer_plugin.empty()) o.tokenizer.name = e.tokenizer_plugin;
  if (!e.tokenizer.empty()) o.tokenizer.params.emplace_back("path", e.tokenizer);
  if (!e.attention.empty()) o.attention = parse_plugin_spec(e.attention, "attention");
  o.plugin_path.assign(e.plugin_path.begin(), e.plugin_path.end());
  o.seed = e.seed;
  o.max_tokens = e.max_tokens;
  o.ignore_eos = e.ignore_eos;
  return o;
}

// A strategy's sampler chain over the session's vocabulary; `ban_eog`: --ignore-eos's ban first, as in `run`
// (a beam search bans the ids itself: BeamOptions).
std::unique_ptr<SamplerChain> make_chain(const Experiment& e, const Session& s, const std::string& chain, bool ban_eog,
                                         std::vector<std::string>& warnings) {
  PluginContext stage_context;  // what a stage may check against (logit-bias's ids)
  stage_context.vocab_size = s.header.config.vocab_size;
  stage_context.tokenizer = &*s.tokenizer;
  auto stages = build_sampler_stages(*s.registry, parse_plugin_chain(chain, "sampler"), warnings, stage_context);
  if (e.ignore_eos && ban_eog)
    if (auto ban = make_ignore_eos_stage(*s.registry, *s.tokenizer)) stages.insert(stages.begin(), std::move(ban));
  return std::make_unique<SamplerChain>(std::move(stages), s.header.config.vocab_size, 0);
}

std::unique_ptr<Worker> make_worker(const Experiment& e) {
  auto w = std::make_unique<Worker>();
  w->session = open_session(session_options(e));
  Session& s = *w->session;
  int widest = 0;
  for (std::size_t i = 0; i < e.strategies.size(); ++i) {
    const auto& st = e.strategies[i];
    std::vector<std::string> warnings;  // reported once, by validate()
    // A beam strategy's header names the greedy chain, as `run --beam-width` does (docs/beam-search.md).
    w->beams.push_back(beam_strategy(st.chain));
    const auto sp = speculative_strategy(st.chain);
    if (w->beams.back()) {
      check_beam_options(*w->beams.back(), s.header.config.vocab_size);
      check_beam_attention(*s.attention, s.attention->name());
      widest = std::max(widest, w->beams.back()->width);
    }
    const std::string chain = w->beams.back() ? "greedy" : sp ? sp->chain : st.chain;
    w->chains.push_back(make_chain(e, s, chain, !w->beams.back(), warnings));
    w->engines.push_back(std::make_unique<Engine>(*s.model, *s.tokenizer, *s.attention, *w->chains.back()));
    RunHeader h = s.header;
    std::erase_if(h.plugins, [](const PluginRecord& p) { return p.kind == "sampler"; });
    for (const auto& stage : w->chains.back()->stages()) h.plugins.push_back({"sampler", stage->name(), stage->params()});
    w->drafts.emplace_back();
    w->speculative.emplace_back();
    if (sp) {
      // The draft as `run --draft-model` opens it (its vocabulary checked against the model's, its chain
      // built from the same stages), and run's speculative loop over the two.
      try {
        RunOptions d = session_options(e);
        d.sampler = parse_plugin_chain(sp->chain, "sampler");
        d.draft_model = sp->draft;
        d.draft_tokenizer = sp->draft_tokenizer;
        d.draft_tokens = sp->k;
        w->drafts.back() = open_draft(d, s);
        Session& ds = *w->drafts.back();
        h.speculative = SpeculativeSetup{ds.header.model_path, ds.header.tokenizer_path, sp->k};
        w->speculative.back() = std::make_unique<SpeculativeEngine>(
            *s.model, *s.tokenizer, *s.attention, *w->chains.back(),
            DraftModel{*ds.model, *ds.attention, *ds.sampler, ds.header.model_path}, sp->k);
      } catch (const ConfigError& x) {
        throw ConfigError("compare: strategies[" + std::to_string(i) + "] '" + st.label + "': " + x.what());
      }
    }
    w->headers.push_back(std::move(h));
  }
  for (int i = 1; i < widest && s.attention->persistent(); ++i)
    w->beam_stores.push_back(s.registry->make_attention(session_options(e).attention, s.config.attention_shape()));
  return w;
}

// Stops a run after a step once SIGINT/SIGTERM came (the command installs polled handlers: interrupt.hpp).
InterruptSink g_interrupt_sink;

class NullSink final : public TraceSink {
 public:
  void header(const RunHeader&) override {}
  void step(const StepEvent&) override {}
  void summary(const Summary&) override {}
};

// One run's options, header and sinks (the report's collector, and its trace when asked), as do_run and
// do_batch set them up alike.
struct RunSetup {
  Run r;
  GenerateOptions g;
  RunHeader h;
  std::unique_ptr<Collector> collect;
  std::unique_ptr<traces::JsonlWriter> writer;
  TeeSink sinks;
  std::string text;
  RunSetup(Worker& w, const Experiment& e, int p, int s, int i, const std::string& traces_dir, LensPoints lens) {
    r.prompt = p;
    r.strategy = s;
    r.sample = i;
    r.seed = run_seed(e, p, s, i);
    g.max_tokens = e.max_tokens;
    g.seed = r.seed;
    g.watch.top_k = kExpectedTop;  // stages and distribution recorded: the report reads both
    h = w.headers[s];
    h.seed = r.seed;
    collect = std::make_unique<Collector>(r, *w.session->tokenizer);
    sinks.add(collect.get());
    if (!traces_dir.empty()) {
      g.watch.lens = lens;
      r.trace = (fs::path(traces_dir) / ("p" + std::to_string(p) + "-s" + std::to_string(s) + "-n" + std::to_string(i) +
                                         ".jsonl")).string();
      writer = std::make_unique<traces::JsonlWriter>(r.trace, *w.session->tokenizer, false,
                                                     trace_writer_thread(g.watch.level, lens != LensPoints::Off));
      sinks.add(writer.get());
    }
    sinks.add(&g_interrupt_sink);  // last: a step is recorded before the run stops after it
  }
  // The text, and the trace closed, read back (which validates it) and given a viewer page.
  Run finish(double ms) {
    r.text = clean_utf8(text);
    if (writer) {
      writer.reset();  // flushed and closed
      const auto trace = traces::read_trace(r.trace);
      const fs::path page = fs::path(r.trace).replace_extension(".html");
      write_file_atomically(page, traces::trace_html(trace));
    }
    r.ms = ms;
    return std::move(r);
  }
};

Run do_run(Worker& w, const Experiment& e, int p, int s, int i, const std::string& traces_dir, LensPoints lens) {
  const auto t0 = std::chrono::steady_clock::now();
  RunSetup run(w, e, p, s, i, traces_dir, lens);
  GenerateOptions& g = run.g;
  RunHeader& h = run.h;
  TeeSink& sinks = run.sinks;
  std::string& text = run.text;
  if (const auto& beam = w.beams[s]) {
    // One store per beam: the session's, then the worker's extra ones (a recompute module needs one).
    std::vector<KvStore*> stores{w.session->attention.get()};
    for (int k = 1; k < beam->width && k - 1 < static_cast<int>(w.beam_stores.size()); ++k) stores.push_back(w.beam_stores[k - 1].get());
    g.watch.lens = LensPoints::Off;  // a beam search records no logit lens (docs/beam-search.md)
    BeamSearch search(*w.session->model, *w.session->tokenizer, std::move(stores));
    const Tokenizer& tok = *w.session->tokenizer;
    BeamOptions bo = *beam;
    bo.ban_eog = e.ignore_eos;
    search.generate(tok.encode(e.prompts[p], tok.add_bos(), false), e.prompts[p], g, bo, h, sinks,
                    [&](std::string_view piece) { text += piece; });
  } else if (w.speculative[s]) {
    g.watch.lens = LensPoints::Off;  // a round's block holds positions not yet decided (docs/speculative.md)
    w.speculative[s]->generate(e.prompts[p], g, h, sinks, [&](std::string_view piece) { text += piece; });
  } else {
    w.engines[s]->generate(e.prompts[p], g, h, sinks, [&](std::string_view piece) { text += piece; });
  }
  return run.finish(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
}

// Runs of sampled strategies over one prompt — rows[j] = (strategy, sample) — decoded together (batched
// decode, glassbox/batch.hpp): each its own seed, chain, store and trace, exactly as do_run would make them;
// the weights read once per step for all, the prompt prefilled by the first and copied by the others. Each
// run's `ms` is its share of the batch's time.
std::vector<Run> do_batch(Worker& w, const Experiment& e, int p, const std::vector<std::pair<int, int>>& rows, const std::string& traces_dir,
                          LensPoints lens) {
  const auto t0 = std::chrono::steady_clock::now();
  Session& ses = *w.session;
  const int n = static_cast<int>(rows.size());
  if (!w.batch_model || w.batch_model->max_block() < n) w.batch_model = std::make_unique<Transformer>(ses.config, ses.source->weights(), n);
  if (w.row_chains.size() < e.strategies.size()) w.row_chains.resize(e.strategies.size());
  for (int j = static_cast<int>(w.row_models.size()) + 1; j < n; ++j) {
    w.row_models.push_back(std::make_unique<Transformer>(ses.config, ses.source->weights(), ses.model->max_block()));
    w.row_stores.push_back(ses.registry->make_attention(session_options(e).attention, ses.config.attention_shape()));
  }
  // Row j ≥ 1 runs its strategy's chain number j - 1 (row 0, the session's own): made on first use.
  for (int j = 1; j < n; ++j) {
    auto& chains = w.row_chains[static_cast<std::size_t>(rows[j].first)];
    while (static_cast<int>(chains.size()) < j) {
      std::vector<std::string> warnings;  // reported once, by validate()
      chains.push_back(make_chain(e, ses, e.strategies[rows[j].first].chain, true, warnings));
    }
  }
  std::vector<std::unique_ptr<RunSetup>> runs;
  SampledBatch batch(*w.batch_model);
  const Tokenizer& tok = *ses.tokenizer;
  // The samples share their prompt: the first prefills it, the others copy its K/V (all but the last
  // position, which each computes for its first distribution). Room for this one prompt.
  const std::vector<std::int32_t> ids = tok.encode(e.prompts[p], tok.add_bos(), false);
  PrefixCache cache(2 * static_cast<std::size_t>(ses.config.n_layers) * ids.size() * static_cast<std::size_t>(ses.config.kv_dim()) * sizeof(float),
                    2);
  batch.use_prefix_cache(&cache);
  for (int j = 0; j < n; ++j) {
    const auto [s, i] = rows[j];
    runs.push_back(std::make_unique<RunSetup>(w, e, p, s, i, traces_dir, lens));
    RunSetup& r = *runs.back();
    const RunParts parts = j == 0 ? RunParts{*ses.model, tok, *ses.attention, w.chains[s].get()}
                                  : RunParts{*w.row_models[j - 1], tok, *w.row_stores[j - 1], w.row_chains[s][j - 1].get()};
    batch.add(parts, ids, e.prompts[p], r.g, r.h, r.sinks,
              [&r](std::string_view piece) { r.text += piece; });
  }
  batch.run_all();
  for (int j = 0; j < n; ++j)
    if (const auto err = batch.error(static_cast<std::size_t>(j))) std::rethrow_exception(err);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / n;
  std::vector<Run> out;
  for (auto& r : runs) out.push_back(r->finish(ms));
  return out;
}

std::string clock_text(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const long t = std::lround(s);
  char buf[32];
  if (t >= 3600) std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
  else std::snprintf(buf, sizeof buf, "%ld:%02ld", t / 60, t % 60);
  return buf;
}

void draw_progress(std::size_t done, std::size_t total, double elapsed) {
  constexpr int kWidth = 30;
  const double f = total ? static_cast<double>(done) / total : 1.0;
  const int full = static_cast<int>(f * kWidth);
  std::string bar;
  for (int i = 0; i < kWidth; ++i) bar += i < full ? "█" : "░";
  const double eta = done ? elapsed / done * (total - done) : NAN;
  std::fprintf(stderr, "\r\033[Kcompare %s %zu/%zu runs · %s elapsed · ETA %s", bar.c_str(), done, total,
               clock_text(elapsed).c_str(), done ? clock_text(eta).c_str() : "?");
  std::fflush(stderr);
}

}  // namespace

std::vector<Run> run_sweep(const Experiment& e, const SweepOptions& opt, std::string* model_sha256) {
  const int P = static_cast<int>(e.prompts.size()), S = static_cast<int>(e.strategies.size());
  std::vector<long long> todo;  // run k = (p * S + s) * samples + i
  for (long long k = 0; k < e.runs(); ++k)
    if (!opt.shard || k % opt.shard->second == opt.shard->first - 1) todo.push_back(k);
  (void)P;
  if (opt.shard && todo.empty())
    throw ConfigError("--shard " + std::to_string(opt.shard->first) + "/" + std::to_string(opt.shard->second) + ": the sweep has " +
                      std::to_string(e.runs()) + " runs, none of them in this shard (use at most " + std::to_string(e.runs()) + " shards)");
  if (!opt.traces_dir.empty()) {
    std::error_code ec;
    fs::create_directories(opt.traces_dir, ec);
    if (ec || !fs::is_directory(opt.traces_dir))
      throw ConfigError("--traces " + opt.traces_dir + ": cannot create the folder");
  }
  const int jobs = static_cast<int>(std::clamp<long long>(opt.jobs, 1, std::max<long long>(1, todo.size())));
  if (opt.batch < 1 || opt.batch > 256) throw ConfigError("--batch " + std::to_string(opt.batch) + " (expected 1..256)");
  // Sessions are opened here, one after the other: plugin loading is not meant to be concurrent.
  std::vector<std::unique_ptr<Worker>> workers;
  for (int j = 0; j < jobs; ++j) workers.push_back(make_worker(e));
  if (model_sha256) *model_sha256 = workers[0]->session->header.model_sha256;

  // Units of work: a run alone, or up to opt.batch samples of one prompt and one sampled strategy decoded
  // together (beam and speculative strategies run one by one).
  auto strategy_of = [&](long long k) { return static_cast<int>(k / e.samples % S); };
  auto prompt_of = [&](long long k) { return static_cast<int>(k / e.samples / S); };
  auto batched = [&](int s) { return opt.batch > 1 && !workers[0]->beams[s] && !workers[0]->speculative[s]; };
  std::vector<std::vector<std::size_t>> units;  // indices into todo
  for (std::size_t at = 0; at < todo.size(); ++at) {
    const long long k = todo[at];
    if (!units.empty() && batched(strategy_of(k)) && static_cast<int>(units.back().size()) < opt.batch) {
      const long long prev = todo[units.back().back()];
      // the sampled strategies over one prompt share a batch (and its prompt's prefill)
      if (batched(strategy_of(prev)) && prompt_of(prev) == prompt_of(k)) {
        units.back().push_back(at);
        continue;
      }
    }
    units.push_back({at});
  }

  std::vector<Run> out(todo.size());
  std::atomic<std::size_t> next{0}, done{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mu;
  auto work = [&](Worker& w) {
    for (;;) {
      const std::size_t u = next++;
      if (u >= units.size() || failed || interrupt_signal()) return;
      const std::vector<std::size_t>& unit = units[u];
      const long long k = todo[unit[0]];
      const int i = static_cast<int>(k % e.samples), s = strategy_of(k), p = prompt_of(k);
      try {
        if (unit.size() == 1) {
          out[unit[0]] = do_run(w, e, p, s, i, opt.traces_dir, opt.lens);
        } else {
          std::vector<std::pair<int, int>> rows;  // (strategy, sample) per row
          for (const std::size_t at : unit) rows.emplace_back(strategy_of(todo[at]), static_cast<int>(todo[at] % e.samples));
          std::vector<Run> runs = do_batch(w, e, p, rows, opt.traces_dir, opt.lens);
          for (std::size_t j = 0; j < unit.size(); ++j) out[unit[j]] = std::move(runs[j]);
        }
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mu);
        if (!error) error = std::current_exception();
        failed = true;
        return;
      }
      done += unit.size();
    }
  };
  const auto t0 = std::chrono::steady_clock::now();
  ThreadGroup threads("--jobs " + std::to_string(jobs), [&] { failed = true; });
  for (int j = 0; j < jobs; ++j) threads.start(work, std::ref(*workers[j]));
  if (opt.progress) {
    while (done < todo.size() && !failed) {
      draw_progress(done, todo.size(), std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  threads.join();
  if (opt.progress) {
    draw_progress(done, todo.size(), std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    std::fputs("\n", stderr);
  }
  if (error) std::rethrow_exception(error);
  return out;
}

// ---------------------------------------------------------------- metrics

double repeated_ngram_share(const std::vector<std::int32_t>& t, int n) {
  if (n < 1 || static_cast<int>(t.size()) < n) return 0;
  std::set<std::vector<std::int32_t>> seen;
  const std::size_t total = t.size() - n + 1;
  for (std::size_t i = 0; i < total; ++i) seen.emplace(t.begin() + i, t.begin() + i + n);
  return 1.0 - static_cast<double>(seen.size()) / total;
}

int longest_loop(const std::vector<std::int32_t>& t) {
  // A loop is a span made of a unit of k tokens repeated at least twice back to back: a run of r
  // consecutive positions with t[j] == t[j-k] and r >= k covers r + k tokens.
  const int n = static_cast<int>(t.size());
  int best = 0;
  for (int k = 1; 2 * k <= n; ++k) {
    int r = 0;
    for (int j = k; j <= n; ++j) {
      if (j < n && t[j] == t[j - k]) {
        ++r;
        continue;
      }
      if (r >= k) best = std::max(best, r + k);
      r = 0;
    }
  }
  return best;
}

namespace {

Stat stat(const std::vector<double>& v) {
  double mean = 0;
  for (double x : v) mean += x;
  mean = v.empty() ? 0 : mean / v.size();
  double ss = 0;
  for (double x : v) ss += (x - mean) * (x - mean);
  const double sd = v.size() > 1 ? std::sqrt(ss / (v.size() - 1)) : 0;
  return {mean, sd};
}

double mean_of(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += x;
  return v.empty() ? 0 : s / v.size();
}

double distinct_n(const std::vector<const Run*>& runs, int n) {
  std::set<std::vector<std::int32_t>> grams;
  std::size_t total = 0;
  for (const Run* r : runs) {
    const auto& t = r->tokens;
    for (std::size_t i = 0; i + n <= t.size(); ++i) {
      grams.emplace(t.begin() + i, t.begin() + i + n);
      ++total;
    }
  }
  return total ? static_cast<double>(grams.size()) / total : 0;
}

// Per-sample metrics of one run, in the order of kSampleStatFields.
struct SampleMetrics {
  double rep4, loop, entropy, chain_entropy, logprob, perplexity, length;
};
SampleMetrics sample_metrics(const Run& r) {
  const double lp = mean_of(r.logprob);
  return {repeated_ngram_share(r.tokens, 4), static_cast<double>(longest_loop(r.tokens)), mean_of(r.entropy),
          mean_of(r.chain_entropy), lp, std::exp(-lp), static_cast<double>(r.tokens.size())};
}

constexpr std::size_t kSampleMetrics = std::size(kSampleStatFields);
using SampleLists = std::array<std::vector<double>, kSampleMetrics>;  // one list of values per metric
std::array<double, kSampleMetrics> as_array(const SampleMetrics& m) {
  return {m.rep4, m.loop, m.entropy, m.chain_entropy, m.logprob, m.perplexity, m.length};
}
SampleStats stats(const SampleLists& lists) {
  SampleStats out;
  for (std::size_t q = 0; q < kSampleMetrics; ++q) out.*kSampleStatFields[q].stat = stat(lists[q]);
  return out;
}

// The diversity metrics of a cell, one list (over the prompts) per strategy.
struct DiversityLists {
  std::vector<double> distinct, distinct_share, distinct_1, distinct_2, distinct_3;
};

ReportRun report_run(const Experiment& e, const Run& r) {
  const auto m = sample_metrics(r);
  ReportRun x;
  x.prompt = r.prompt, x.strategy = r.strategy, x.sample = r.sample;
  x.seed = r.seed;
  x.text = r.text;
  x.tokens = r.tokens;
  x.pieces = r.pieces;
  x.stop_reason = r.stop_reason;
  x.length = r.tokens.size();
  x.rep_4 = m.rep4, x.loop = m.loop, x.entropy = m.entropy, x.chain_entropy = m.chain_entropy;
  x.logprob = m.logprob, x.perplexity = m.perplexity;
  x.first = r.first;
  x.command = run_command(e, r.prompt, r.strategy, r.sample);
  x.trace = r.trace;
  if (r.speculative)
    x.speculative = ReportRun::Speculative{r.speculative->rounds, r.speculative->proposed, r.speculative->accepted,
                                           r.speculative->tokens, r.speculative->acceptance_rate(),
                                           r.speculative->tokens_per_target_forward()};
  if (r.grammar_steps > 0)
    x.grammar = ReportRun::Grammar{r.grammar_steps, r.grammar_removed / r.grammar_steps,
                                   r.grammar_removed_mass / r.grammar_steps};
  return x;
}

// The runs of a sweep by place: every (prompt, strategy, sample) exactly once.
struct SweepRuns {
  int P = 0, S = 0, N = 0;
  std::vector<const Run*> at;  // (P, S, N)
  double run_ms = 0;
  std::vector<const Run*> of(int p, int s) const {
    std::vector<const Run*> v;
    for (int i = 0; i < N; ++i) v.push_back(at[(static_cast<std::size_t>(p) * S + s) * N + i]);
    return v;
  }
};

SweepRuns index_runs(const Experiment& e, const std::vector<Run>& runs) {
  SweepRuns sw;
  const int P = sw.P = static_cast<int>(e.prompts.size()), S = sw.S = static_cast<int>(e.strategies.size()), N = sw.N = e.samples;
  auto& at = sw.at;
  double& run_ms = sw.run_ms;
  at.assign(static_cast<std::size_t>(e.runs()), nullptr);
  for (const auto& r : runs) {
    if (r.prompt < 0 || r.prompt >= P || r.strategy < 0 || r.strategy >= S || r.sample < 0 || r.sample >= N)
      throw ConfigError("run (prompt " + std::to_string(r.prompt) + ", strategy " + std::to_string(r.strategy) +
                        ", sample " + std::to_string(r.sample) + ") is outside the experiment");
    const std::size_t k = (static_cast<std::size_t>(r.prompt) * S + r.strategy) * N + r.sample;
    if (at[k]) throw ConfigError("run (prompt " + std::to_string(r.prompt) + ", strategy " + std::to_string(r.strategy) +
                                 ", sample " + std::to_string(r.sample) + ") appears twice");
    at[k] = &r;
    run_ms += r.ms;
  }
  for (std::size_t k = 0; k < at.size(); ++k)
    if (!at[k])
      throw ConfigError("missing run (prompt " + std::to_string(k / N / S) + ", strategy " + std::to_string(k / N % S) +
                        ", sample " + std::to_string(k % N) + "): " + std::to_string(std::count(at.begin(), at.end(), nullptr)) +
                        " of " + std::to_string(at.size()) + " runs are missing (a shard not merged?)");

  return sw;
}

// One (prompt, strategy) cell: its samples' figures, diversity and first tokens; each sample's metrics also
// go to the strategy's pooled lists and the cell's diversity to the strategy's across-prompt lists.
Cell make_cell(int p, int s, const std::vector<const Run*>& rs, int N, SampleLists& pooled_s, DiversityLists& across) {
  Cell c;
  c.prompt = p, c.strategy = s, c.n = N;
  std::set<std::vector<std::int32_t>> distinct;
  SampleLists per;
  std::map<std::int32_t, std::pair<int, std::string>> firsts;  // id -> (count, text)
  double lp_sum = 0;
  std::size_t lp_steps = 0;
  for (const Run* r : rs) {
    for (float x : r->logprob) lp_sum += x;
    lp_steps += r->logprob.size();
    distinct.insert(r->tokens);
    const auto m = as_array(sample_metrics(*r));
    for (std::size_t q = 0; q < m.size(); ++q) {
      per[q].push_back(m[q]);
      pooled_s[q].push_back(m[q]);
    }
    ++c.stop_reasons[r->stop_reason];
    auto& f = firsts[r->first];
    ++f.first;
    f.second = r->first_text;
  }
  c.distinct = distinct.size();
  c.distinct_share = static_cast<double>(distinct.size()) / N;
  c.distinct_1 = distinct_n(rs, 1);
  c.distinct_2 = distinct_n(rs, 2);
  c.distinct_3 = distinct_n(rs, 3);
  c.samples = stats(per);
  // Over every scored token of the cell: one unlikely sample cannot dominate it as it does the
  // mean of per-sample perplexities.
  c.perplexity_pooled = std::exp(-lp_sum / static_cast<double>(lp_steps));
  across.distinct.push_back(static_cast<double>(c.distinct));
  across.distinct_share.push_back(c.distinct_share);
  across.distinct_1.push_back(c.distinct_1);
  across.distinct_2.push_back(c.distinct_2);
  across.distinct_3.push_back(c.distinct_3);
  // First tokens: the expected distribution (step 0 after the chain, the same in every sample of
  // the cell) beside the observed frequencies.
  std::map<std::int32_t, std::pair<double, std::string>> expected;
  for (std::size_t q = 0; q < rs[0]->first_expected.size(); ++q)
    expected[rs[0]->first_expected[q].first] = {rs[0]->first_expected[q].second, rs[0]->first_expected_text[q]};
  std::set<std::int32_t> ids;
  for (const auto& f : firsts) ids.insert(f.first);
  for (const auto& x : expected) ids.insert(x.first);
  for (auto id : ids) {
    const auto fi = firsts.find(id);
    const auto ei = expected.find(id);
    FirstToken t;
    t.id = id;
    t.text = fi != firsts.end() ? fi->second.second : ei->second.second;
    t.count = fi == firsts.end() ? 0 : fi->second.first;
    t.freq = static_cast<double>(t.count) / N;
    if (ei != expected.end()) t.expected = ei->second.first;
    c.first_tokens.push_back(std::move(t));
  }
  std::stable_sort(c.first_tokens.begin(), c.first_tokens.end(), [](const FirstToken& a, const FirstToken& b) {
    const double ea = a.expected.value_or(-1), eb = b.expected.value_or(-1);
    if (ea != eb) return ea > eb;
    if (a.count != b.count) return a.count > b.count;
    return a.id < b.id;
  });
  return c;
}

// A strategy's figures over every prompt: diversity across prompts, pooled samples and perplexity, stop
// reasons, and what only a beam search, speculative decoding or a grammar stage has.
StrategyFigures strategy_figures(const Experiment& e, int s, const SweepRuns& sw, const SampleLists& pooled_s,
                                 const DiversityLists& across) {
  const int P = sw.P, N = sw.N;
  auto runs_of = [&](int p, int st_) { return sw.of(p, st_); };
  StrategyFigures st;
  st.label = e.strategies[s].label;
  st.chain = e.strategies[s].chain;
  st.runs = P * N;
  st.distinct = stat(across.distinct);
  st.distinct_share = stat(across.distinct_share);
  st.distinct_1 = stat(across.distinct_1);
  st.distinct_2 = stat(across.distinct_2);
  st.distinct_3 = stat(across.distinct_3);
  st.samples = stats(pooled_s);
  double lp_sum = 0;
  std::size_t lp_steps = 0;
  for (int p = 0; p < P; ++p)
    for (const Run* r : runs_of(p, s)) {
      ++st.stop_reasons[r->stop_reason];
      for (float x : r->logprob) lp_sum += x;
      lp_steps += r->logprob.size();
    }
  if (const auto b = beam_strategy(e.strategies[s].chain)) {
    // What only a beam search has: its cost in forward passes per generated token and its K/V copies.
    double fw = 0, copies = 0, steps = 0;
    for (int p = 0; p < P; ++p)
      for (const Run* r : runs_of(p, s)) fw += r->beam_forwards, copies += r->beam_kv_copies, steps += r->logprob.size();
    st.beam = BeamFigures{b->width, b->length_penalty, steps > 0 ? fw / steps : 0.0, copies / (P * N)};
  }
  if (const auto sp = speculative_strategy(e.strategies[s].chain)) {
    // Pooled over the strategy's runs: accepted / proposed drafted tokens, tokens decided / target forwards.
    SpeculativeFigures f;
    f.draft = sp->draft, f.draft_tokenizer = sp->draft_tokenizer, f.chain = sp->chain, f.k = sp->k;
    for (int p = 0; p < P; ++p)
      for (const Run* r : runs_of(p, s))
        if (r->speculative) {
          f.rounds += r->speculative->rounds, f.draft_forwards += r->speculative->draft_forwards;
          f.proposed += r->speculative->proposed, f.accepted += r->speculative->accepted, f.tokens += r->speculative->tokens;
        }
    f.acceptance_rate = f.proposed > 0 ? static_cast<double>(f.accepted) / f.proposed : 0.0;
    f.tokens_per_target_forward = f.rounds > 0 ? static_cast<double>(f.tokens) / f.rounds : 0.0;
    st.speculative = std::move(f);
  }
  {
    // A chain with a grammar stage: the mean, over every step the stage ran at, of what it removed.
    long long steps = 0;
    double removed = 0, mass = 0;
    for (int p = 0; p < P; ++p)
      for (const Run* r : runs_of(p, s)) steps += r->grammar_steps, removed += r->grammar_removed, mass += r->grammar_removed_mass;
    if (steps > 0) st.grammar = GrammarFigures{steps, removed / steps, mass / steps};
  }
  st.perplexity_pooled = std::exp(-lp_sum / static_cast<double>(lp_steps));
  return st;
}

// Mean entropy at each step index over the runs that reached it, and its quartiles.
StepEntropy step_entropy(int s, const SweepRuns& sw) {
  const int P = sw.P;
  auto runs_of = [&](int p, int st_) { return sw.of(p, st_); };
  StepEntropy se;
  se.strategy = s;
  auto& h = se.entropy;
  auto& hc = se.chain_entropy;
  auto& n = se.runs;
  for (int p = 0; p < P; ++p)
    for (const Run* r : runs_of(p, s))
      for (std::size_t t = 0; t < r->entropy.size(); ++t) {
        if (t >= n.size()) {
          h.push_back(0);
          hc.push_back(0);
          n.push_back(0);
        }
        h[t] += r->entropy[t];
        hc[t] += r->chain_entropy[t];
        ++n[t];
      }
  for (std::size_t t = 0; t < n.size(); ++t) {
    h[t] /= n[t];
    hc[t] /= n[t];
  }
  // The quartiles at each step index (linear interpolation between order statistics, as R's type 7).
  auto quantile = [](const std::vector<double>& sorted, double q) {
    const double at = q * static_cast<double>(sorted.size() - 1);
    const auto lo = static_cast<std::size_t>(std::floor(at));
    const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
    return sorted[lo] + (at - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
  };
  for (std::size_t t = 0; t < n.size(); ++t) {
    std::vector<double> hv, cv;
    for (int p = 0; p < P; ++p)
      for (const Run* r : runs_of(p, s))
        if (t < r->entropy.size()) hv.push_back(r->entropy[t]), cv.push_back(r->chain_entropy[t]);
    std::sort(hv.begin(), hv.end());
    std::sort(cv.begin(), cv.end());
    se.entropy_p25.push_back(quantile(hv, 0.25));
    se.entropy_median.push_back(quantile(hv, 0.5));
    se.entropy_p75.push_back(quantile(hv, 0.75));
    se.chain_entropy_median.push_back(quantile(cv, 0.5));
  }
  return se;
}

}  // namespace

Report make_report(const Experiment& e, std::vector<Run> runs, double wall_s) {
  const SweepRuns sw = index_runs(e, runs);
  const int P = sw.P, S = sw.S, N = sw.N;
  Report rep;
  rep.experiment = e;
  rep.wall_s = wall_s;
  rep.run_ms = sw.run_ms;
  std::vector<SampleLists> pooled(S);
  std::vector<DiversityLists> across_prompts(S);
  for (int p = 0; p < P; ++p)
    for (int s = 0; s < S; ++s) rep.cells.push_back(make_cell(p, s, sw.of(p, s), N, pooled[s], across_prompts[s]));
  for (int s = 0; s < S; ++s) {
    rep.strategies.push_back(strategy_figures(e, s, sw, pooled[s], across_prompts[s]));
    rep.per_step.push_back(step_entropy(s, sw));
  }
  for (const Run* r : sw.at) rep.runs.push_back(report_run(e, *r));
  return rep;
}

// ---------------------------------------------------------------- the report's JSON

namespace {

json stat_json(const Stat& s) { return {{"mean", s.mean}, {"sd", s.sd}}; }

void put_samples(json& j, const SampleStats& s) {
  for (const auto& f : kSampleStatFields) j[f.key] = stat_json(s.*f.stat);
}

json cell_json(const Cell& c) {
  json j = {{"prompt", c.prompt},
            {"strategy", c.strategy},
            {"n", c.n},
            {"distinct", c.distinct},
            {"distinct_share", c.distinct_share},
            {"distinct_1", c.distinct_1},
            {"distinct_2", c.distinct_2},
            {"distinct_3", c.distinct_3},
            {"stop_reasons", c.stop_reasons},
            {"perplexity_pooled", c.perplexity_pooled}};
  put_samples(j, c.samples);
  json ft = json::array();
  for (const auto& t : c.first_tokens)
    ft.push_back({{"id", t.id},
                  {"text", t.text},
                  {"count", t.count},
                  {"freq", t.freq},
                  {"expected", t.expected ? json(*t.expected) : json(nullptr)}});
  j["first_tokens"] = std::move(ft);
  return j;
}

json strategy_json(const StrategyFigures& st) {
  json j = {{"label", st.label},
            {"chain", st.chain},
            {"runs", st.runs},
            {"distinct", stat_json(st.distinct)},
            {"distinct_share", stat_json(st.distinct_share)},
            {"distinct_1", stat_json(st.distinct_1)},
            {"distinct_2", stat_json(st.distinct_2)},
            {"distinct_3", stat_json(st.distinct_3)},
            {"stop_reasons", st.stop_reasons},
            {"perplexity_pooled", st.perplexity_pooled}};
  put_samples(j, st.samples);
  if (const auto& b = st.beam)
    j["beam"] = {{"width", b->width}, {"length_penalty", b->length_penalty},
                 {"forwards_per_step", b->forwards_per_step}, {"kv_copies_per_run", b->kv_copies_per_run}};
  if (const auto& sp = st.speculative) {
    j["speculative"] = {{"draft", sp->draft}, {"k", sp->k}, {"chain", sp->chain},
                        {"rounds", sp->rounds}, {"draft_forwards", sp->draft_forwards}, {"proposed", sp->proposed},
                        {"accepted", sp->accepted}, {"tokens", sp->tokens}, {"acceptance_rate", sp->acceptance_rate},
                        {"tokens_per_target_forward", sp->tokens_per_target_forward}};
    if (!sp->draft_tokenizer.empty()) j["speculative"]["draft_tokenizer"] = sp->draft_tokenizer;
  }
  if (const auto& g = st.grammar)
    j["grammar"] = {{"steps", g->steps}, {"removed_per_step", g->removed_per_step}, {"removed_mass_per_step", g->removed_mass_per_step}};
  return j;
}

json report_run_json(const ReportRun& r) {
  json j = {{"prompt", r.prompt},
            {"strategy", r.strategy},
            {"sample", r.sample},
            {"seed", r.seed},
            {"text", r.text},
            {"tokens", r.tokens},
            {"pieces", r.pieces},
            {"stop_reason", r.stop_reason},
            {"length", r.length},
            {"rep_4", r.rep_4},
            {"loop", r.loop},
            {"entropy", r.entropy},
            {"chain_entropy", r.chain_entropy},
            {"logprob", r.logprob},
            {"perplexity", r.perplexity},
            {"first", r.first},
            {"command", r.command},
            {"trace", r.trace}};
  if (const auto& sp = r.speculative)
    j["speculative"] = {{"rounds", sp->rounds}, {"proposed", sp->proposed}, {"accepted", sp->accepted}, {"tokens", sp->tokens},
                        {"acceptance_rate", sp->acceptance_rate}, {"tokens_per_target_forward", sp->tokens_per_target_forward}};
  if (const auto& g = r.grammar)
    j["grammar"] = {{"steps", g->steps}, {"removed_per_step", g->removed_per_step}, {"removed_mass_per_step", g->removed_mass_per_step}};
  return j;
}

}  // namespace

json to_json(const Report& rep) {
  json strategies = json::array(), cells = json::array(), per_step = json::array(), runs = json::array();
  for (const auto& st : rep.strategies) strategies.push_back(strategy_json(st));
  for (const auto& c : rep.cells) cells.push_back(cell_json(c));
  for (const auto& p : rep.per_step)
    per_step.push_back({{"strategy", p.strategy}, {"entropy", p.entropy}, {"chain_entropy", p.chain_entropy}, {"runs", p.runs},
                        {"entropy_p25", p.entropy_p25}, {"entropy_median", p.entropy_median}, {"entropy_p75", p.entropy_p75},
                        {"chain_entropy_median", p.chain_entropy_median}});
  for (const auto& r : rep.runs) runs.push_back(report_run_json(r));
  json j = {{"schema", kReportSchema},
            {"experiment", experiment_json(rep.experiment)},
            {"strategies", std::move(strategies)},
            {"cells", std::move(cells)},
            {"per_step", std::move(per_step)},
            {"runs", std::move(runs)},
            {"timings", {{"wall_s", rep.wall_s}, {"run_ms", rep.run_ms}}}};
  if (rep.model_sha256) j["model_sha256"] = *rep.model_sha256;
  return j;
}

// ---------------------------------------------------------------- Markdown and CSV

namespace {

std::string fixed(double x, int digits) {
  if (!std::isfinite(x)) return "—";
  std::ostringstream os;
  os << std::fixed << std::setprecision(digits) << x;
  return os.str();
}

std::string pm(const Stat& st, int digits) { return fixed(st.mean, digits) + " ± " + fixed(st.sd, digits); }

// Text for one table cell or list item: control characters escaped, '|' escaped, cut to `max` characters.
std::string show(const std::string& s, std::size_t max = 60) {
  std::string out;
  std::size_t chars = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = s[i];
    if ((c & 0xC0) != 0x80 && ++chars > max) {
      out += "…";
      break;
    }
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '|') out += "\\|";
    else if (c == '`') out += "'";
    else if (c < 0x20) out += "?";
    else out += static_cast<char>(c);
  }
  return out;
}

using traces::person_text;

// A command line without its --seed N (a run that draws nothing does not use it).
std::string without_seed(std::string command) {
  const auto at = command.find(" --seed ");
  if (at == std::string::npos) return command;
  const auto end = command.find(' ', at + 8);
  return command.erase(at, end == std::string::npos ? std::string::npos : end - at);
}

std::string stops_text(const std::map<std::string, int>& stops) {
  std::string t;
  for (const auto& [k, v] : stops) t += (t.empty() ? "" : ", ") + k + " " + std::to_string(v);
  return t;
}

// A Markdown row's columns rep-4 to logprob (a strategy's and a cell's alike).
std::string sample_columns(const SampleStats& m) {
  return pm(m.rep_4, 3) + " | " + pm(m.loop, 1) + " | " + pm(m.entropy, 3) + " | " + pm(m.chain_entropy, 3) + " | " +
         pm(m.logprob, 3);
}

}  // namespace

bool argmax_only(const Report& rep, int s) {
  const auto& st = rep.strategies.at(static_cast<std::size_t>(s));
  if (!st.beam && !(st.samples.chain_entropy.mean == 0 && st.samples.chain_entropy.sd == 0)) return false;
  for (const auto& c : rep.cells)
    if (c.strategy == s && c.distinct != 1) return false;
  return true;
}

std::string markdown(const Report& rep) {
  const Experiment& ex = rep.experiment;
  const int N = ex.samples;
  std::ostringstream o;
  o << "# glassbox compare\n\n";
  o << "model: " << (ex.model.empty() ? "embedded toy model" : ex.model) << " · " << ex.prompts.size() << " prompt(s) × "
    << ex.strategies.size() << " strategies × " << N << " samples · at most " << ex.max_tokens << " tokens · seed " << ex.seed
    << (ex.independent_seeds ? " (independent seeds per strategy)" : " (sample i: same seed in every strategy)") << "\n\n";
  o << "Mean ± standard deviation. distinct = distinct continuations per prompt; distinct-n = unique n-grams / all "
       "n-grams across a prompt's samples; rep-4 = repeated 4-gram share within a sample; loop = longest repeated "
       "span (tokens); H model / H chain = mean entropy (nats) of the model's distribution / of the one sampled from; "
       "logprob = mean log p per token under the model; ppl = exp(−mean log p) over all the tokens. Definitions: docs/compare.md.\n\n";
  const std::string head = "| distinct | distinct-1 | distinct-2 | distinct-3 | rep-4 | loop | H model | H chain | logprob | ppl | length | stops |\n";
  const std::string rule = "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n";
  o << "## By strategy\n\n| strategy | chain " << head << "|---|---" << rule;
  for (const auto& st : rep.strategies) {
    o << "| " << show(st.label) << " | `" << show(st.chain) << "` | " << pm(st.distinct, 2) << " | " << pm(st.distinct_1, 3)
      << " | " << pm(st.distinct_2, 3) << " | " << pm(st.distinct_3, 3) << " | " << sample_columns(st.samples) << " | "
      << fixed(st.perplexity_pooled, 2) << " | " << pm(st.samples.length, 1) << " | " << stops_text(st.stop_reasons) << " |\n";
  }
  // What only some strategies have (docs/compare.md): a beam search's cost, speculative decoding's
  // acceptance, the probability mass a grammar removed.
  std::string specific;
  for (const auto& st : rep.strategies) {
    std::vector<std::string> parts;
    if (const auto& b = st.beam)
      parts.push_back("beam width " + std::to_string(b->width) + ": " + fixed(b->forwards_per_step, 2) +
                      " forward passes per step, " + fixed(b->kv_copies_per_run, 1) + " K/V copies per run");
    if (const auto& sp = st.speculative)
      parts.push_back("speculative K=" + std::to_string(sp->k) + " (draft " + show(sp->draft) + "): " +
                      fixed(100 * sp->acceptance_rate, 1) + " % of " + std::to_string(sp->proposed) +
                      " drafted tokens accepted, " + fixed(sp->tokens_per_target_forward, 2) + " tokens per target forward");
    if (const auto& g = st.grammar)
      parts.push_back("grammar removed " + fixed(g->removed_mass_per_step, 3) + " of the probability mass (" +
                      fixed(g->removed_per_step, 1) + " candidates) per step, mean of " + std::to_string(g->steps) + " steps");
    if (parts.empty()) continue;
    specific += "- " + show(st.label) + ": ";
    for (std::size_t i = 0; i < parts.size(); ++i) specific += (i ? "; " : "") + parts[i];
    specific += "\n";
  }
  if (!specific.empty()) o << "\nStrategy-specific:\n\n" << specific;
  const int S = static_cast<int>(ex.strategies.size());
  for (std::size_t p = 0; p < ex.prompts.size(); ++p) {
    o << "\n## Prompt " << p + 1 << ": \"" << show(ex.prompts[p], 80) << "\"\n\n| strategy " << head << "|---" << rule;
    for (const auto& c : rep.cells) {
      if (static_cast<std::size_t>(c.prompt) != p) continue;
      o << "| " << show(ex.strategies[c.strategy].label) << " | " << c.distinct << "/" << N << " | " << fixed(c.distinct_1, 3)
        << " | " << fixed(c.distinct_2, 3) << " | " << fixed(c.distinct_3, 3) << " | " << sample_columns(c.samples) << " | "
        << fixed(c.perplexity_pooled, 2) << " | " << pm(c.samples.length, 1) << " | " << stops_text(c.stop_reasons) << " |\n";
    }
    o << "\nFirst token: each token drawn at step 0, the samples that drew it (its probability after the chain)\n\n";
    for (const auto& c : rep.cells) {
      if (static_cast<std::size_t>(c.prompt) != p) continue;
      o << "- " << show(ex.strategies[c.strategy].label) << ":";
      // The tokens drawn, most often first; then, if room is left, tokens the chain allowed that no sample
      // drew. Never one the chain gave probability 0 (greedy's other candidates are not alternatives).
      std::vector<const FirstToken*> drawn, allowed;
      for (const auto& f : c.first_tokens) {
        if (f.count > 0) drawn.push_back(&f);
        else if (f.expected && *f.expected > 0) allowed.push_back(&f);
      }
      std::stable_sort(drawn.begin(), drawn.end(), [](const FirstToken* a, const FirstToken* b) { return a->count > b->count; });
      int shown = 0;
      for (const FirstToken* f : drawn) {
        if (++shown > 6) break;
        o << " `" << show(person_text(f->text), 20) << "` " << f->count << "/" << N << " ("
          << (f->expected ? fixed(*f->expected, 3) : "—") << ")";
      }
      if (drawn.size() > 6) o << " … " << drawn.size() - 6 << " more drawn";
      if (!allowed.empty() && shown < 6) {
        o << "; allowed, not drawn:";
        for (std::size_t k = 0; k < allowed.size() && shown < 6; ++k, ++shown)
          o << " `" << show(person_text(allowed[k]->text), 20) << "` (" << fixed(*allowed[k]->expected, 3) << ")";
      }
      o << "\n";
    }
    constexpr int kListed = 5;
    o << "\nSamples (the first " << std::min(N, kListed) << " of " << N
      << " per strategy; every one, with its command, in --json and --html):\n\n";
    for (int s = 0; s < S; ++s) {
      o << "**" << show(ex.strategies[s].label) << "**\n\n";
      // An argmax at every step (greedy, beam search): one text, listed once.
      const bool same = argmax_only(rep, s);
      for (int i = 0; i < (same ? 1 : std::min(N, kListed)); ++i) {
        const auto& r = rep.runs[(p * S + s) * N + i];
        o << i + 1 << ". \"" << show(r.text, 100) << "\" (" << r.stop_reason << ")"
          << (same ? " — argmax at every step: all " + std::to_string(N) + " samples are this text" : std::string()) << "  \n   `"
          << (same ? without_seed(r.command) : r.command) << "`\n";
      }
      o << "\n";
    }
  }
  return o.str();
}

namespace {
std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}
std::string csv_num(double x) {
  std::ostringstream os;
  os << std::setprecision(10) << x;
  return os.str();
}
}  // namespace

std::string csv(const Report& rep) {
  // One row per strategy (scope "strategy", prompt empty) then one per prompt × strategy (scope "cell").
  // Pooled cell metrics have no spread: their _sd columns are empty in cell rows.
  const Experiment& ex = rep.experiment;
  std::ostringstream o;
  const char* pooled[] = {"distinct", "distinct_share", "distinct_1", "distinct_2", "distinct_3"};
  o << "scope,prompt_index,prompt,strategy,chain,runs";
  for (const char* k : pooled) o << "," << k << "," << k << "_sd";
  for (const auto& f : kSampleStatFields) o << "," << f.key << "," << f.key << "_sd";
  // Strategy-specific columns last (empty where they do not apply, and in cell rows).
  o << ",perplexity_pooled,stop_max_tokens,stop_stop_token,stop_context_full,acceptance_rate,tokens_per_target_forward,"
       "grammar_removed_mass_per_step\n";
  auto stops = [](const std::map<std::string, int>& s) {
    auto n = [&](const char* k) {
      const auto it = s.find(k);
      return it != s.end() ? std::to_string(it->second) : std::string("0");
    };
    return n("max_tokens") + "," + n("stop_token") + "," + n("context_full");
  };
  auto stat_columns = [](const Stat& x) { return "," + csv_num(x.mean) + "," + csv_num(x.sd); };
  for (const auto& st : rep.strategies) {
    o << "strategy,,," << csv_field(st.label) << "," << csv_field(st.chain) << "," << st.runs;
    for (const Stat* x : {&st.distinct, &st.distinct_share, &st.distinct_1, &st.distinct_2, &st.distinct_3}) o << stat_columns(*x);
    for (const auto& f : kSampleStatFields) o << stat_columns(st.samples.*f.stat);
    o << "," << csv_num(st.perplexity_pooled) << "," << stops(st.stop_reasons) << ","
      << (st.speculative ? csv_num(st.speculative->acceptance_rate) : "") << ","
      << (st.speculative ? csv_num(st.speculative->tokens_per_target_forward) : "") << ","
      << (st.grammar ? csv_num(st.grammar->removed_mass_per_step) : "") << "\n";
  }
  for (const auto& c : rep.cells) {
    const auto& st = ex.strategies[c.strategy];
    o << "cell," << c.prompt << "," << csv_field(ex.prompts[c.prompt]) << "," << csv_field(st.label) << ","
      << csv_field(st.chain) << "," << c.n;
    for (double x : {static_cast<double>(c.distinct), c.distinct_share, c.distinct_1, c.distinct_2, c.distinct_3})
      o << "," << csv_num(x) << ",";
    for (const auto& f : kSampleStatFields) o << stat_columns(c.samples.*f.stat);
    o << "," << csv_num(c.perplexity_pooled) << "," << stops(c.stop_reasons) << ",,,\n";
  }
  return o.str();
}

Report merge_shards(const std::vector<std::string>& files) {
  if (files.empty()) throw ConfigError("compare merge: no shard files");
  // Shards are untrusted files: parsed through the JSON limits, every field typed by its key path,
  // the experiment bounded as a fresh one is, shard indexes within 1..N and run indexes within the sweep.
  std::vector<Run> runs;
  std::optional<json> experiment;
  std::optional<Experiment> e;
  std::string sha;
  int count = 0;
  std::set<int> seen;
  double wall = 0;
  for (const auto& path : files) {
    const json j = read_json_input<ConfigError>(path, "a shard result of `compare --shard`");
    if (!j.is_object() || !j.contains("schema") || j["schema"] != kShardSchema)
      throw ConfigError(path + ": not a shard result (expected schema " + std::string(kShardSchema) + ")");
    const JsonIn<ConfigError> in(j, path);
    const int n = in.at("shard").at("count").get<int>(1, 1 << 20);
    const int index = in.at("shard").at("index").get<int>(1, n);
    const std::string model_sha = in.at("model_sha256").get<std::string>();
    if (!experiment) {
      e = experiment_from_json(in.at("experiment").raw(), path);
      experiment = j["experiment"];
      sha = model_sha;
      count = n;
    } else {
      if (j["experiment"] != *experiment)
        throw ConfigError(path + ": another experiment than " + files[0] + " (prompts, strategies, seed, ...)");
      if (model_sha != sha)
        throw ConfigError(path + ": run with another model file (sha256 " + model_sha + ") than " + files[0]);
      if (n != count)
        throw ConfigError(path + ": shard " + std::to_string(index) + "/" + std::to_string(n) + " but " +
                          files[0] + " is one of " + std::to_string(count));
    }
    if (!seen.insert(index).second) throw ConfigError(path + ": shard " + std::to_string(index) + " given twice");
    in.at("runs").each([&](const JsonIn<ConfigError>& r) { runs.push_back(run_from_json(r.raw(), path + ": " + r.path(), *e)); });
    wall = std::max(wall, in.at("timings").at("wall_s").get<double>(0));
  }
  if (static_cast<int>(seen.size()) != count) {
    std::string missing;
    for (int i = 1; i <= count; ++i)
      if (!seen.count(i)) missing += (missing.empty() ? "" : ", ") + std::to_string(i);
    throw ConfigError("shards " + missing + " of " + std::to_string(count) + " are missing");
  }
  if (static_cast<long long>(runs.size()) != e->runs())
    throw ConfigError(files[0] + ": the shards hold " + std::to_string(runs.size()) + " runs, the experiment has " +
                      std::to_string(e->runs()));
  Report report = make_report(*e, std::move(runs), wall);
  report.model_sha256 = sha;
  return report;
}

}  // namespace glassbox::cli::compare
