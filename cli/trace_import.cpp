// `glassbox trace import`: another engine's per-position logits (llama2.c / llama.cpp goldens, raw float32 dumps)
// as a glassbox trace, so that `trace diff` compares glassbox with that engine step by step.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <numeric>

#include "commands.hpp"
#include "glassbox/error.hpp"
#include "glassbox/traces/diff.hpp"
#include "glassbox/traces/reader.hpp"
#include "glassbox/traces/writer.hpp"
#include "glassbox/structured_input.hpp"
#include "glassbox/file_io.hpp"
#include "engine_import.hpp"
#include "session.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace glassbox::cli {

namespace {

// What the other engine computed: the prompt, then the logits after each fed position and the token it fed next.
struct External {
  std::string format;                      // for messages: "llama2.c golden", "llama.cpp golden", "float32 dump"
  std::string prompt;                      // text, when the file has it
  std::vector<std::int32_t> prompt_ids;    // empty: encode `prompt` with the tokenizer
  std::vector<std::vector<float>> logits;  // [pos][vocab], from position 0
  std::vector<std::int32_t> next;          // [pos]: the token fed after pos (-1: unknown, the chain's pick)
  std::string model_hint;                  // a model file the golden names (llama.cpp's "file")
};

// A logit from the file: finite in float32 (a NaN or an infinity is the file's fault, named here, not a
// stage's "NaN logit" later).
float file_logit(double v, const std::string& where) {
  const float f = static_cast<float>(v);
  if (!std::isfinite(f)) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    throw InputError(where + ": " + (std::isnan(v) ? std::string("NaN") : std::string(buf)) + " is not a logit (expected a finite float32 number)");
  }
  return f;
}

std::vector<float> read_logits(const json& l, const std::string& where) {
  if (!l.is_array() || l.empty()) throw InputError(where + ".logits: expected an array of numbers");
  std::vector<float> out(l.size());
  for (std::size_t i = 0; i < l.size(); ++i) {
    if (!l[i].is_number()) throw InputError(where + ".logits[" + std::to_string(i) + "]: expected a number, got " + l[i].type_name());
    out[i] = file_logit(l[i].get<double>(), where + ".logits[" + std::to_string(i) + "]");
  }
  return out;
}

// A token id from the file: an integer in 0..2^31-1 (a larger one would wrap to another token).
std::int32_t json_id(const json& v, const std::string& where) {
  if (!v.is_number_integer() || (v.is_number_unsigned() ? v.get<std::uint64_t>() > INT32_MAX : (v.get<std::int64_t>() < 0 || v.get<std::int64_t>() > INT32_MAX)))
    throw InputError(where + ": expected a token id (an integer 0..2147483647), got " + v.dump());
  return static_cast<std::int32_t>(v.get<std::int64_t>());
}

std::int32_t read_id(const json& o, const char* key, const std::string& where) {
  auto it = o.find(key);
  if (it == o.end()) throw InputError(where + "." + key + ": expected a token id");
  return json_id(*it, where + "." + key);
}

// One object of a golden JSONL (llama2.c's {prompt, prompt_ids, steps[{pos, input, next, logits}]} or
// llama.cpp's {file, prompt, prompt_ids, steps[{pos, token, logits}]}).
External from_golden(const json& g, const std::string& where) {
  External x;
  auto steps = g.find("steps");
  if (steps == g.end() || !steps->is_array() || steps->empty()) throw InputError(where + ": no 'steps' array");
  const bool llama2c = (*steps)[0].contains("input");
  x.format = llama2c ? "llama2.c golden" : "llama.cpp golden";
  if (g.contains("prompt") && g["prompt"].is_string()) x.prompt = g["prompt"].get<std::string>();
  if (auto p = g.find("prompt_ids"); p != g.end()) {
    if (!p->is_array() || p->empty()) throw InputError(where + ".prompt_ids: expected a non-empty array of token ids");
    for (std::size_t i = 0; i < p->size(); ++i) x.prompt_ids.push_back(json_id((*p)[i], where + ".prompt_ids[" + std::to_string(i) + "]"));
  }
  if (auto f = g.find("file"); f != g.end() && f->is_string()) x.model_hint = f->get<std::string>();
  const auto n = steps->size();
  for (std::size_t i = 0; i < n; ++i) {
    const json& s = (*steps)[i];
    const std::string w = where + ".steps[" + std::to_string(i) + "]";
    if (!s.is_object()) throw InputError(w + ": expected an object");
    if (s.contains("pos") && s["pos"] != i) throw InputError(w + ".pos: " + s["pos"].dump() + ", expected " + std::to_string(i));
    const std::int32_t fed = read_id(s, llama2c ? "input" : "token", w);
    if (i < x.prompt_ids.size() && fed != x.prompt_ids[i])
      throw InputError(w + ": feeds token " + std::to_string(fed) + " but prompt_ids[" + std::to_string(i) + "] is " +
                       std::to_string(x.prompt_ids[i]));
    if (i > 0 && x.next[i - 1] >= 0 && x.next[i - 1] != fed)
      throw InputError(w + ": feeds token " + std::to_string(fed) + " but the previous step chose " + std::to_string(x.next[i - 1]));
    if (i > 0 && x.next[i - 1] < 0) x.next[i - 1] = fed;  // llama.cpp: the token fed here is the previous one's next
    x.logits.push_back(read_logits(s.contains("logits") ? s["logits"] : json(), w));
    x.next.push_back(llama2c ? read_id(s, "next", w) : -1);
  }
  return x;
}

// A raw little-endian float32 dump: one row of vocab_size logits per position from 0, as a llama2.c
// build writes with fwrite(logits, sizeof(float), vocab_size, f) after each forward. The tokens fed are
// the prompt's, then each row's argmax (a greedy run's dump).
External from_dump(const std::string& path, int vocab) {
  External x;
  x.format = "float32 dump";
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  const auto size = static_cast<std::uintmax_t>(f.tellg());
  const std::uintmax_t row = static_cast<std::uintmax_t>(vocab) * sizeof(float);
  if (size == 0 || size % row != 0)
    throw InputError(path + ": " + std::to_string(size) + " bytes is not a whole number of rows of " + std::to_string(vocab) +
                     " float32 logits (the model's vocabulary); not a golden JSONL either");
  f.seekg(0);
  for (std::uintmax_t r = 0; r < size / row; ++r) {
    std::vector<float> l(static_cast<std::size_t>(vocab));
    f.read(reinterpret_cast<char*>(l.data()), static_cast<std::streamsize>(row));
    if (!f) throw InputError(path + ": read failed");
    for (std::size_t i = 0; i < l.size(); ++i)
      file_logit(l[i], path + ": row " + std::to_string(r) + " (byte " + std::to_string(r * row + 4 * i) + "), logit " + std::to_string(i));
    x.logits.push_back(std::move(l));
    x.next.push_back(-1);
  }
  return x;
}

// The prompt: --prompt, else the file's own ids, else its text, else the request saved beside it
// (STEM.request.json next to STEM.response.json/.sse, as the llama.cpp captures are stored). `ids` stay empty
// unless the file gave them.
std::string imported_prompt(const std::string& file, const ImportedRun& run, const std::optional<std::string>& prompt_arg,
                            std::vector<std::int32_t>& ids) {
  std::string prompt;
  if (prompt_arg) {
    prompt = *prompt_arg;
  } else if (run.prompt_ids) {
    ids = *run.prompt_ids;
    prompt = run.prompt.value_or("");
  } else if (run.prompt) {
    prompt = *run.prompt;
  } else {
    std::string stem = file;
    for (const char* ext : {".response.json", ".response.sse"})
      if (stem.size() > std::strlen(ext) && stem.compare(stem.size() - std::strlen(ext), std::strlen(ext), ext) == 0)
        stem.resize(stem.size() - std::strlen(ext));
    const std::string req = stem + ".request.json";
    std::string why;
    std::optional<std::string> text = stem != file ? read_structured_file(req, why) : std::nullopt;
    const json r = text ? parse_json_input<InputError>(*text, req) : json();
    if (r.is_object() && r.contains("request_body") && r["request_body"].is_object() && r["request_body"].contains("prompt") &&
        r["request_body"]["prompt"].is_string()) {
      prompt = r["request_body"]["prompt"].get<std::string>();
      std::cerr << "glassbox: " << file << ": the prompt is " << req << "'s request_body.prompt\n";
    } else {
      throw ConfigError(file + ": the " + run.dialect + " response does not hold its prompt: give it with --prompt (the text the engine was sent)");
    }
  }
  return prompt;
}

// Imported step k (its token after `prev`): the whole distribution from every logit, or the listed
// entries and the unlisted mass; a step the engine reported nothing for has all its mass unlisted.
traces::TraceStep imported_step(const ImportedRun& run, const ImportedStep& x, int k, int P, const std::vector<std::int32_t>& ids,
                                std::int32_t prev, const Tokenizer& tok, int V, int trace_top, int& reported) {
  const bool logits = run.distribution == "logits", post = run.distribution == "post";
  traces::TraceStep st;
  st.phase = k == 0 ? traces::TracePhase::Prefill : traces::TracePhase::Decode;
  st.step = k;
  st.pos = P - 1 + k;
  st.input_ids = k == 0 ? ids : std::vector<std::int32_t>{prev};
  st.token = x.token;
  auto text = [&](std::int32_t id) { return std::string(tok.decode(prev, id)); };
  st.token_text = text(x.token);
  if (logits && x.reported) {
    // Every logit: the distribution is exact, as in a full glassbox trace.
    const std::vector<float>& l = x.logits;
    double m = -HUGE_VAL;
    for (float v : l) m = std::max<double>(m, v);
    double z = 0, ent = 0;
    for (float v : l) z += std::exp(v - m);
    for (float v : l) {
      const double q = std::exp(v - m) / z;
      if (q > 0) ent -= q * std::log(q);
    }
    std::vector<std::int32_t> order(static_cast<std::size_t>(V));
    std::iota(order.begin(), order.end(), 0);
    const int K = std::min(trace_top, V);
    std::partial_sort(order.begin(), order.begin() + K, order.end(), [&](std::int32_t a2, std::int32_t b2) { return l[a2] > l[b2] || (l[a2] == l[b2] && a2 < b2); });
    for (int i = 0; i < K; ++i)
      st.top.push_back({order[i], text(order[i]), traces::json_float(l[order[i]]), traces::json_float(static_cast<float>(std::exp(l[order[i]] - m) / z))});
    st.logprob = traces::json_float(static_cast<float>(l[x.token] - m - std::log(z)));
    st.prob = traces::json_float(static_cast<float>(std::exp(l[x.token] - m) / z));
    st.entropy = traces::json_float(static_cast<float>(ent));
    for (float v : l) st.logits.push_back(traces::json_float(v));
    st.written.logits = traces::LogitsEncoding::Base64;
  } else if (x.reported) {
    // A partial distribution: the listed entries (logit = logprob, a log-softmax being one choice of
    // logits), and the mass of the rest.
    double listed = 0, ent = 0;
    for (const auto& c : x.top) {
      const double p = post ? c.value : std::exp(c.value);
      if (!(p > 0)) continue;  // p = 0 (a post list's zeroed survivors, -FLT_MAX): nothing to compare in log space
      const double lp = post ? std::log(p) : c.value;
      st.top.push_back({c.id, text(c.id), lp, p});
      listed += p;
      ent -= p * std::log(p);
    }
    std::stable_sort(st.top.begin(), st.top.end(), [](const traces::TraceCandidate& a2, const traces::TraceCandidate& b2) { return *a2.logit > *b2.logit; });
    const double rest = std::clamp(x.unlisted.value_or(1 - listed), 0.0, 1.0);
    if (rest > 0) ent -= rest * std::log(rest);
    st.unlisted = rest;
    st.entropy = std::max(0.0, ent);
    if (!x.chosen) throw InputError(x.where + ": no probability for the chosen token " + std::to_string(x.token));
    st.prob = post ? *x.chosen : std::exp(*x.chosen);
    st.logprob = post ? (st.prob > 0 ? std::log(st.prob) : -1e30) : *x.chosen;
    ++reported;
  } else {
    st.unlisted = 1.0;  // the engine reported nothing for this step
  }
  st.draw.selected = x.token;
  st.draw.prob = st.prob;
  if (run.dialect == "llamacpp-kld" && !st.top.empty() && st.top[0].id != x.token) {
    // llama-perplexity scores a given text: each step's token is the text's (teacher-forced, as a replay's),
    // and the engine's own pick would have been its argmax.
    st.draw.selected = st.top[0].id;
    st.draw.prob = st.top[0].prob;
    st.forced = true;
  }
  return st;
}

// Another engine's output (engine_import.hpp) as a trace: header.imported names the dialect and what each
// step's distribution is (raw, post-sampling, every logit); a top-N list keeps its unlisted mass.
void import_engine(const std::string& file, const std::string& from, int index, const std::string& out_path, int trace_top,
                   RunOptions& opt, const std::optional<std::string>& prompt_arg) {
  if (opt.model.empty())
    throw ConfigError("name the model the other engine ran with --model: its vocabulary aligns the tokens and the trace's header records it");
  auto s = open_session(opt);
  const Tokenizer& tok = *s->tokenizer;
  const int V = s->config.vocab_size;
  ImportedRun run = read_engine_file(file, from, index, tok);
  for (const auto& n : run.notes) std::cerr << "glassbox: " << file << ": " << n << "\n";

  std::vector<std::int32_t> ids;
  std::string prompt = imported_prompt(file, run, prompt_arg, ids);
  if (ids.empty()) ids = tok.encode(prompt, tok.add_bos(), false);
  if (ids.empty()) throw InputError(file + ": the prompt encodes to no tokens");
  for (auto id : ids)
    if (id < 0 || id >= V) throw InputError(file + ": prompt token " + std::to_string(id) + " is outside the vocabulary of " + std::to_string(V));
  if (prompt.empty()) {
    for (std::size_t i = 0; i < ids.size(); ++i) prompt += std::string(tok.decode(i ? ids[i - 1] : -1, ids[i]));
    if (!ids.empty() && ids[0] == tok.bos_id()) prompt = prompt.substr(std::string(tok.decode(-1, ids[0])).size());
    if (!prompt.empty() && prompt[0] == ' ') prompt.erase(0, 1);  // SentencePiece's dummy prefix
  }
  const int P = static_cast<int>(ids.size());
  int n_steps = static_cast<int>(run.steps.size());
  if (P + n_steps - 1 > s->config.seq_len) n_steps = std::max(0, s->config.seq_len - P + 1);
  if (n_steps == 0) throw InputError(file + ": the prompt fills the model's context: no step fits");

  traces::TraceHeader h = traces::header_record(s->header);
  h.prompt = prompt;
  h.prompt_ids = ids;
  h.max_tokens = n_steps;
  const bool logits = run.distribution == "logits";
  h.level = logits ? TraceLevel::Full : TraceLevel::Basic;
  h.seed = 0;
  h.imported = traces::TraceImport{run.dialect, file, run.distribution};

  OutputFile out(out_path, OutputFile::Live::Refused);
  std::size_t validated_steps = 0;
  out.check_before_commit([&](const fs::path& tmp) {
    try {
      validated_steps = traces::read_trace(tmp.string()).steps.size();
    } catch (const Error& e) {
      // The temporary file's name means nothing to the user: name the input entry the failing line came from.
      std::string msg = e.what();
      const std::string t = tmp.string() + ":";
      if (msg.rfind(t, 0) == 0) {
        std::size_t end = t.size();
        long line = 0;
        while (end < msg.size() && std::isdigit(static_cast<unsigned char>(msg[end]))) line = line * 10 + (msg[end++] - '0');
        const long k = line - 2;  // line 1 is the header, line k+2 step k
        if (k >= 0 && k < static_cast<long>(run.steps.size()) && !run.steps[static_cast<std::size_t>(k)].where.empty())
          msg = run.steps[static_cast<std::size_t>(k)].where + " (step " + std::to_string(k) + ")" + msg.substr(end);
        else
          msg = file + msg.substr(end);
      }
      throw InputError(file + ": the imported trace does not validate, nothing written to " + out_path + ": " + msg);
    }
  });
  out.write(traces::dump(traces::to_json(h)) + "\n");
  traces::TraceSummary sum;
  sum.stop_reason = "max_tokens";
  std::int32_t prev = ids.back();
  int reported = 0;
  for (int k = 0; k < n_steps; ++k) {
    const ImportedStep& x = run.steps[static_cast<std::size_t>(k)];
    if (x.token < 0 || x.token >= V) throw InputError(file + ": step " + std::to_string(k) + " chose token " + std::to_string(x.token) + ", outside the vocabulary");
    traces::TraceStep st = imported_step(run, x, k, P, ids, prev, tok, V, trace_top, reported);
    st.kv.tokens = st.pos + 1;
    out.write(traces::dump(traces::to_json(st)) + "\n");
    if (tok.is_eog(x.token) || x.token == tok.eos_id() || x.token == tok.bos_id()) {
      sum.stop_reason = "stop_token";
      sum.stop_token = x.token;
      sum.stop_token_text = std::string(tok.piece(x.token));
      if (k + 1 < static_cast<int>(run.steps.size()))
        std::cerr << "glassbox: " << file << ": step " << k << " chose " << traces::show_text(std::string(tok.piece(x.token)))
                  << ", which ends a glassbox run: the " << run.steps.size() - k - 1 << " later steps are left out\n";
      break;
    }
    prev = x.token;
    ++sum.generated;
  }
  out.write(traces::dump(traces::to_json(sum)) + "\n");
  out.commit();
  std::cerr << "glassbox: " << out_path << ": " << run.dialect << " (" << run.distribution << " distribution) " << file << ", prompt "
            << traces::show_text(prompt, 40) << ", " << validated_steps << " steps, " << reported + (logits ? static_cast<int>(validated_steps) : 0)
            << " with the engine's distribution\n";
}

// A golden JSONL's chosen line (--prompt-index), which may name its model (llama.cpp's "file", beside it or in
// ../gguf/): then opt.model is set to it unless --model named one.
json golden_line(std::istream& in, const std::string& file, int index, RunOptions& opt) {
  json g;
  std::string line;
  std::vector<std::string> lines;
  while (std::getline(in, line))
    if (!line.empty()) lines.push_back(std::move(line));
  const int pick = std::max(index, 0);
  if (pick >= static_cast<int>(lines.size()))
    throw InputError(file + ": --prompt-index " + std::to_string(pick) + " but the file holds " +
                     std::to_string(lines.size()) + " prompt" + (lines.size() == 1 ? "" : "s"));
  const std::string where = file + ":" + std::to_string(pick + 1);
  g = parse_json_input<InputError>(lines[pick], where);  // the size and nesting limits of every JSON input
  if (!g.is_object()) throw InputError(where + ": expected a JSON object");
  if (g.value("type", "") == "header" || g.contains("schema"))
    throw InputError(file + " is already a glassbox trace: diff it directly");
  if (lines.size() > 1 && index < 0)
    std::cerr << "glassbox: " << file << " holds " << lines.size() << " prompts; importing the first ("
              << g.value("prompt", std::string()) << "); --prompt-index picks another\n";
  if (opt.model.empty() && g.contains("file") && g["file"].is_string()) {
    for (const fs::path& p : {fs::path(file).parent_path() / g["file"].get<std::string>(),
                              fs::path(file).parent_path() / ".." / "gguf" / g["file"].get<std::string>()}) {
      std::error_code ec;
      if (fs::exists(p, ec)) {
        opt.model = p.lexically_normal().string();
        break;
      }
    }
  }
  return g;
}

// The trace of another engine's every logit (a golden line or a dump): step k is position P-1+k's
// distribution through the session's chain (re-applied, argmax), its token the engine's; validated before it
// replaces anything.
void write_logits_trace(const External& x, Session& session, const std::string& file, const std::string& out_path, int trace_top,
                        const std::string& model) {
  auto* s = &session;
  const int V = s->config.vocab_size;
  const int P = static_cast<int>(x.prompt_ids.size());
  // Glassbox's steps start at the prompt's last position: step 0 is the prefill's distribution.
  const int n_steps = std::min(static_cast<int>(x.logits.size()) - P + 1, s->config.seq_len - P + 1);
  RunHeader h = s->header;
  h.prompt = x.prompt;
  h.prompt_ids = x.prompt_ids;
  h.max_tokens = n_steps;
  h.level = TraceLevel::Full;
  h.seed = 0;
  // The rule for every output (file_io.hpp), and a trace that validates or none: the check runs on the
  // complete temporary file, before it replaces anything.
  traces::JsonlWriter writer(out_path, *s->tokenizer, false, traces::WriterThread::EveryLine, traces::LogitsEncoding::Base64, {},
                             OutputFile::Live::Refused);
  std::size_t validated_steps = 0;
  writer.check_before_commit([&](const fs::path& tmp) {
    try {
      validated_steps = traces::read_trace(tmp.string()).steps.size();
    } catch (const Error& e) {
      throw InputError(out_path + ": the imported trace does not validate, nothing written: " + e.what());
    }
  });
  writer.header(h);

  SamplerChain& chain = *s->sampler;
  chain.reset(0);
  for (auto id : x.prompt_ids) chain.accept(id);
  const int top_k = std::min(trace_top, V);
  std::vector<std::int32_t> order(static_cast<std::size_t>(V));
  std::vector<TokenProb> top(static_cast<std::size_t>(top_k));
  Summary sum;
  sum.stop_reason = "max_tokens";
  KvState kv;  // the session's module as named in the header; the other engine's cache is not known
  s->attention->describe(kv);
  kv.bytes = 0;
  std::int32_t prev = x.prompt_ids.back();
  StageRecorder recorder(chain, V, top_k);
  for (int k = 0; k < n_steps; ++k) {
    const int pos = P - 1 + k;
    const std::vector<float>& l = x.logits[static_cast<std::size_t>(pos)];
    const SampleResult picked = chain.sample(l, &recorder);
    const std::int32_t pick = picked.id;
    const std::int32_t token = x.next[static_cast<std::size_t>(pos)] >= 0 ? x.next[static_cast<std::size_t>(pos)] : pick;
    if (token < 0 || token >= V) throw InputError(file + ": position " + std::to_string(pos) + " chose token " + std::to_string(token) + ", outside the vocabulary");
    // The raw distribution, computed as the engine does (engine.cpp's report).
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + top_k, order.end(), [&](std::int32_t p, std::int32_t q) {
      return l[p] > l[q] || (l[p] == l[q] && p < q);
    });
    const float m = l[order[0]];
    double total = 0, mean_shifted = 0;
    for (float v : l) total += std::exp(v - m);
    for (float v : l) mean_shifted += std::exp(v - m) / total * (v - m);
    for (int i = 0; i < top_k; ++i) top[i] = {order[i], l[order[i]], static_cast<float>(std::exp(l[order[i]] - m) / total)};
    StepEvent e;
    e.phase = k == 0 ? "prefill" : "decode";
    e.step = k;
    e.pos = pos;
    e.input_ids = k == 0 ? std::span<const std::int32_t>(x.prompt_ids) : std::span<const std::int32_t>(&prev, 1);
    e.token = token;
    e.token_text = s->tokenizer->decode(prev, token);
    e.prob = static_cast<float>(std::exp(l[token] - m) / total);
    e.logprob = static_cast<float>(l[token] - m - std::log(total));
    e.entropy = static_cast<float>(std::log(total) - mean_shifted);
    e.top = top;
    e.logits = l;
    e.stages = recorder.records();
    e.chain_prob = recorder.chosen_prob();
    e.draw_u = picked.draw_u;
    e.sampled = pick;
    e.forced = token != pick;  // the other engine chose otherwise (a near-tie): recorded, as in a replay
    kv.tokens = pos + 1;  // what a cache would hold here; the other engine's own is unknown
    e.kv = &kv;
    writer.step(e);
    if (s->tokenizer->is_eog(token) || token == s->tokenizer->eos_id() || token == s->tokenizer->bos_id()) {
      sum.stop_reason = "stop_token";
      sum.stop_token = token;
      sum.stop_token_text = std::string(s->tokenizer->piece(token));
      break;
    }
    chain.accept(token);
    prev = token;
    ++sum.generated;
  }
  writer.summary(sum);
  std::cerr << "glassbox: " << out_path << ": " << x.format << " " << file << ", prompt " << traces::show_text(x.prompt, 40)
            << ", " << validated_steps << " steps (positions " << P - 1 << ".." << P - 2 + static_cast<int>(validated_steps)
            << "), every logit\n";
}

}  // namespace

void add_trace_import(CLI::App* trace) {
  struct Args {
    std::string file, out, sampler = "greedy", from;
    int index = -1, top = 10;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = trace->add_subcommand(
      "import", "turn another engine's output (llama.cpp server, OpenAI, vLLM, TGI, HF .npy, llama.cpp .kld, golden JSONL, float32 dump) into a glassbox trace");
  cmd->add_option("FILE", a->file, "golden JSONL (one prompt per line) or raw float32 logits dump")->required();
  cmd->add_option("-o,--output", a->out, "the glassbox trace to write")->required();
  cmd->add_option("--prompt-index", a->index, "which line (prompt) of a golden JSONL, from 0 (default 0)")->check(CLI::Range(0, 1 << 30));
  cmd->add_option("--sampler,-s", a->sampler, "the chain re-applied to each step's logits (default greedy, as goldens are)")->capture_default_str();
  cmd->add_option("--trace-top", a->top, "candidates listed per step and per stage")->check(CLI::Range(1, 1000))->capture_default_str();
  // --model/--tokenizer fill the header (model file, SHA-256, config) and decode token texts; --prompt
  // gives a dump's prompt text.
  auto binder = std::make_shared<RunOptionsBinder>(cmd, kImport);
  auto prompt = std::make_shared<std::string>();
  cmd->add_option("--prompt,-p", *prompt, "the prompt a float32 dump started from (a golden JSONL names its own)");
  cmd->add_option("--from", a->from, "the other engine's dialect, when its shape does not tell (llamacpp-completion, llamacpp-post, "
                                     "llamacpp-old, openai-chat, openai-chat-post, openai-legacy, vllm, tgi, hf-npy, llamacpp-kld)");
  cmd->callback([a, binder, prompt, cmd] {
    RunOptions opt = binder->finish();
    opt.sampler = parse_plugin_chain(a->sampler, "sampler");
    opt.seed = 0;  // the chain re-applied here must select by argmax: a drawing chain would pick at random
    if (auto why = not_a_regular_file(a->file)) throw InputError(a->file + ": " + *why + " (expected a golden JSONL or a float32 dump)");
    if (!a->from.empty() || is_engine_file(a->file)) {
      import_engine(a->file, a->from, a->index, a->out, a->top, opt,
                    cmd->get_option("--prompt")->count() ? std::optional<std::string>(*prompt) : std::nullopt);
      return;
    }
    std::ifstream in(a->file, std::ios::binary);
    if (!in) throw InputError(a->file + ": cannot read: " + std::strerror(errno));
    const bool is_json = in.peek() == '{';

    json g;
    if (is_json) g = golden_line(in, a->file, a->index, opt);
    if (opt.model.empty())
      throw ConfigError("name the model the logits came from with --model (and --tokenizer for a llama2.c checkpoint): "
                        "the trace's header records it and the token texts come from its vocabulary");
    auto s = open_session(opt);
    const int V = s->config.vocab_size;
    External x;
    if (is_json) {
      x = from_golden(g, a->file + ":" + std::to_string(std::max(a->index, 0) + 1));
    } else {
      x = from_dump(a->file, V);
      if (!cmd->get_option("--prompt")->count()) throw ConfigError("a float32 dump holds no prompt: give it with --prompt");
    }
    if (cmd->get_option("--prompt")->count()) x.prompt = *prompt;
    if (x.prompt_ids.empty()) x.prompt_ids = s->tokenizer->encode(x.prompt, s->tokenizer->add_bos(), false);
    for (std::size_t i = 0; i < x.logits.size(); ++i)
      if (static_cast<int>(x.logits[i].size()) != V)
        throw InputError(a->file + ": position " + std::to_string(i) + " has " + std::to_string(x.logits[i].size()) +
                         " logits but model " + opt.model + " has a vocabulary of " + std::to_string(V) + ": another model?");
    for (auto id : x.prompt_ids)
      if (id < 0 || id >= V) throw InputError(a->file + ": prompt token " + std::to_string(id) + " is outside the vocabulary of " + std::to_string(V));
    const int P = static_cast<int>(x.prompt_ids.size());
    if (static_cast<int>(x.logits.size()) < P)
      throw InputError(a->file + ": " + std::to_string(x.logits.size()) + " positions of logits, fewer than the prompt's " +
                       std::to_string(P) + " tokens: nothing was generated");
    if (P > s->config.seq_len) throw InputError(a->file + ": the prompt is longer than the model's context");

    write_logits_trace(x, *s, a->file, a->out, a->top, opt.model);
  });
}

}  // namespace glassbox::cli
