// JSON Lines trace writer: one header line, one line per engine step, one summary line.
#include "glassbox/traces/writer.hpp"

#include <charconv>

#include "glassbox/error.hpp"

namespace glassbox::traces {

using nlohmann::json;

double json_float(float f) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, f);
  double d = 0;
  std::from_chars(buf, end, d);
  return d;
}

namespace {
TracePlugin plugin_record(const PluginRecord& r) { return {r.name, r.params}; }
std::vector<double> floats(std::span<const float> xs) {
  std::vector<double> out;
  out.reserve(xs.size());
  for (float x : xs) out.push_back(json_float(x));
  return out;
}
}  // namespace

TraceHeader header_record(const RunHeader& h) {
  const Config& c = h.config;
  TraceHeader r;
  r.model.path = h.model_path;
  r.model.sha256 = h.model_sha256;
  r.model.format = c.format;
  r.model.architecture = c.architecture;
  r.model.weight_types = h.weight_types;
  // (rope_theta and norm_eps widen as they always have: the float's exact value, not its shortest text)
  r.model.config = {c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads, c.vocab_size, c.seq_len,
                    c.shared_classifier, c.format_version, static_cast<double>(c.rope_theta),
                    static_cast<double>(c.norm_eps)};
  r.tokenizer_path = h.tokenizer_path;
  for (const auto& p : h.plugins) {
    if (p.kind == "sampler") r.samplers.push_back(plugin_record(p));
    else if (p.kind == "tokenizer") r.tokenizer = plugin_record(p);
    else if (p.kind == "attention") r.attention = plugin_record(p);
  }
  r.seed = h.seed;
  r.rng = h.rng;
  r.prompt = h.prompt;
  r.prompt_ids = h.prompt_ids;
  r.max_tokens = h.max_tokens;
  r.level = h.level;
  // Where the numbers came from: the summation order (last bits of the logits) depends on the kernel set.
  if (!h.kernels.empty()) r.kernels = h.kernels;
  if (h.threads > 0) r.threads = h.threads;
  return r;
}

TraceStep step_record(const StepEvent& e, const Tokenizer& tok) {
  const std::int32_t prev = e.input_ids.empty() ? -1 : e.input_ids.back();
  TraceStep r;
  r.phase = std::string_view(e.phase) == "prefill" ? TracePhase::Prefill : TracePhase::Decode;
  r.step = e.step;
  r.pos = e.pos;
  r.input_ids.assign(e.input_ids.begin(), e.input_ids.end());
  r.token = e.token;
  r.token_text = std::string(e.token_text);
  r.prob = json_float(e.prob);
  r.logprob = json_float(e.logprob);
  r.entropy = json_float(e.entropy);
  r.top.reserve(e.top.size());
  for (const auto& t : e.top)
    r.top.push_back({t.id, std::string(tok.decode(prev, t.id)), json_float(t.logit), json_float(t.prob)});
  r.stages.reserve(e.stages.size());
  for (const auto& s : e.stages) {
    TraceStage st{s.name, s.params ? *s.params : Params{}, s.kept, json_float(s.mass), json_float(s.entropy), {}};
    st.top.reserve(s.top.size());
    for (const auto& t : s.top) st.top.push_back({t.id, std::string(tok.decode(prev, t.id)), std::nullopt, json_float(t.prob)});
    r.stages.push_back(std::move(st));
  }
  if (e.draw_u >= 0) r.draw.u = json_float(e.draw_u);
  r.draw.selected = e.sampled >= 0 ? e.sampled : e.token;
  r.draw.prob = json_float(e.chain_prob);
  if (e.kv) r.kv = kv_record(*e.kv);
  r.attention_dots = e.attention_dots;
  if (!e.attention.empty()) {
    r.attention.emplace();
    for (const auto& a : e.attention) r.attention->push_back({a.layer, a.head, a.pos, a.first_pos, floats(a.weights)});
  }
  r.ms = e.ms;
  r.logits = floats(e.logits);
  r.forced = e.forced;  // replay: token is the golden's, draw.selected the chain's own pick
  return r;
}

TraceKv kv_record(const KvState& kv) {
  TraceKv r;
  r.tokens = kv.tokens;
  r.capacity = kv.capacity;
  r.bytes = kv.bytes;
  if (!kv.module.empty()) r.module = kv.module;
  r.params = kv.params;
  r.first_pos = kv.first_pos;
  r.evicted = kv.evicted;
  if (kv.block_size > 0)
    r.blocks = TraceKv::Blocks{kv.block_size, kv.blocks_used, kv.blocks_free, kv.last_block_unused,
                               std::vector<std::int64_t>(kv.block_table.begin(), kv.block_table.end())};
  return r;
}

TraceContext context_record(const PolicyEvent& e, const Tokenizer& tok) {
  std::string text;
  std::int32_t prev = -1;
  for (auto id : e.dropped_ids) {
    text += tok.decode(prev, id);
    prev = id;
  }
  return {e.policy, e.step, e.limit, e.dropped_from, e.dropped_to, e.dropped_ids, std::move(text), e.kept, e.detail};
}

TraceSummary summary_record(const Summary& s) {
  return {s.generated, s.stop_reason, s.ttft_ms, s.prefill_tok_s, s.decode_tok_s, s.policy_firings};
}

json header_json(const RunHeader& h) { return to_json(header_record(h)); }
json step_json(const StepEvent& e, const Tokenizer& tok) { return to_json(step_record(e, tok)); }
json kv_json(const KvState& kv) { return to_json(kv_record(kv)); }
json context_json(const PolicyEvent& e, const Tokenizer& tok) { return to_json(context_record(e, tok)); }
json summary_json(const Summary& s) { return to_json(summary_record(s)); }

JsonlWriter::JsonlWriter(const std::string& path, const Tokenizer& tok, bool keep_partial)
    : path_(path), out_(path), tok_(tok), keep_partial_(keep_partial) {}

void JsonlWriter::write(const json& j) {
  // One write per line, unbuffered: every finished line is in the (temporary) file.
  out_.write(dump(j) + '\n');
}

void JsonlWriter::header(const RunHeader& h) { write(header_json(h)); }
void JsonlWriter::step(const StepEvent& e) { write(step_json(e, tok_)); }
void JsonlWriter::summary(const Summary& s) {
  write(summary_json(s));
  out_.commit();
}

void JsonlWriter::policy(const PolicyEvent& e) { write(context_json(e, tok_)); }

std::string JsonlWriter::finish_cut_short() {
  if (!out_.open()) return path_;
  if (!out_.in_place() && !keep_partial_ && regular_file_exists(path_)) {
    const std::string partial = path_ + ".partial";
    out_.commit_as(partial);
    return partial;
  }
  out_.commit();
  return path_;
}

std::string JsonlWriter::error(const std::string& message) {
  write(to_json(TraceEnd{"error", message, std::nullopt}));
  return finish_cut_short();
}

std::string JsonlWriter::interrupted(const std::string& signal) {
  write(to_json(TraceEnd{"interrupted", "interrupted by " + signal, signal}));
  return finish_cut_short();
}

}  // namespace glassbox::traces
