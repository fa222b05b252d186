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

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

namespace {
json params_json(const Params& p) {
  json o = json::object();
  for (const auto& kv : p.values()) {
    // (not a structured binding: clang 14, which builds the fuzzers, cannot capture one)
    const std::string& k = kv.first;
    std::visit([&](const auto& x) {
      using T = std::decay_t<decltype(x)>;
      o[k] = T(x);
    }, kv.second);
  }
  return o;
}
json plugin_json(const PluginRecord& r) { return {{"name", r.name}, {"params", params_json(r.params)}}; }
}  // namespace

json header_json(const RunHeader& h) {
  const Config& c = h.config;
  json plugins = json::object();
  json samplers = json::array();
  for (const auto& p : h.plugins) {
    if (p.kind == "sampler") samplers.push_back(plugin_json(p));
    else plugins[p.kind] = plugin_json(p);
  }
  plugins["sampler"] = samplers;
  json j = {{"type", "header"},
          {"schema", kSchema},
          {"model", {{"path", h.model_path},
                     {"sha256", h.model_sha256},
                     {"format", c.format},
                     {"architecture", c.architecture},
                     {"weight_types", h.weight_types},
                     {"config", {{"dim", c.dim}, {"hidden_dim", c.hidden_dim}, {"n_layers", c.n_layers},
                                 {"n_heads", c.n_heads}, {"n_kv_heads", c.n_kv_heads}, {"vocab_size", c.vocab_size},
                                 {"seq_len", c.seq_len}, {"shared_classifier", c.shared_classifier},
                                 {"format_version", c.format_version}, {"rope_theta", c.rope_theta},
                                 {"norm_eps", c.norm_eps}}}}},
          {"tokenizer", {{"path", h.tokenizer_path}}},
          {"plugins", plugins},
          {"seed", h.seed},
          {"rng", h.rng},
          {"prompt", h.prompt},
          {"prompt_ids", h.prompt_ids},
          {"max_tokens", h.max_tokens},
          {"trace_level", h.level == TraceLevel::Full ? "full" : "basic"}};
  // Where the numbers came from: the summation order (last bits of the logits) depends on the kernel set.
  if (!h.kernels.empty()) j["kernels"] = h.kernels;
  if (h.threads > 0) j["threads"] = h.threads;
  return j;
}

json step_json(const StepEvent& e, const Tokenizer& tok) {
  const std::int32_t prev = e.input_ids.empty() ? -1 : e.input_ids.back();
  json top = json::array();
  for (const auto& t : e.top)
    top.push_back({{"id", t.id}, {"text", std::string(tok.decode(prev, t.id))}, {"logit", json_float(t.logit)}, {"prob", json_float(t.prob)}});
  json stages = json::array();
  for (const auto& s : e.stages) {
    json st = json::array();
    for (const auto& t : s.top) st.push_back({{"id", t.id}, {"text", std::string(tok.decode(prev, t.id))}, {"prob", json_float(t.prob)}});
    stages.push_back({{"name", s.name}, {"params", s.params ? params_json(*s.params) : json::object()},
                      {"kept", s.kept}, {"mass", json_float(s.mass)}, {"entropy", json_float(s.entropy)}, {"top", st}});
  }
  json j = {{"type", "step"},
            {"phase", e.phase},
            {"step", e.step},
            {"pos", e.pos},
            {"input_ids", std::vector<std::int32_t>(e.input_ids.begin(), e.input_ids.end())},
            {"token", {{"id", e.token}, {"text", std::string(e.token_text)}}},
            {"prob", json_float(e.prob)},
            {"logprob", json_float(e.logprob)},
            {"entropy", json_float(e.entropy)},
            {"top", top},
            {"stages", stages},
            {"draw", {{"u", e.draw_u < 0 ? json(nullptr) : json(json_float(e.draw_u))},
                      {"selected", e.sampled >= 0 ? e.sampled : e.token},
                      {"prob", json_float(e.chain_prob)}}},
            {"kv", e.kv ? kv_json(*e.kv) : json{{"tokens", 0}, {"capacity", 0}, {"bytes", 0}}},
            {"attention_dots", e.attention_dots},
            {"ms", e.ms}};
  if (!e.attention.empty()) {
    json rows = json::array();
    for (const auto& r : e.attention) {
      json w = json::array();
      for (float x : r.weights) w.push_back(json_float(x));
      rows.push_back({{"layer", r.layer}, {"head", r.head}, {"pos", r.pos}, {"first_pos", r.first_pos}, {"weights", std::move(w)}});
    }
    j["attention"] = std::move(rows);
  }
  if (e.forced) j["forced"] = true;  // replay: token is the golden's, draw.selected the chain's own pick
  if (!e.logits.empty()) {
    json l = json::array();
    for (float x : e.logits) l.push_back(json_float(x));
    j["logits"] = std::move(l);
  }
  return j;
}

json kv_json(const KvState& kv) {
  json j = {{"tokens", kv.tokens}, {"capacity", kv.capacity}, {"bytes", kv.bytes}};
  if (!kv.module.empty()) j["module"] = kv.module;
  j["params"] = params_json(kv.params);
  j["first_pos"] = kv.first_pos;
  j["evicted"] = kv.evicted;
  if (kv.block_size > 0) {
    j["block_size"] = kv.block_size;
    j["blocks_used"] = kv.blocks_used;
    j["blocks_free"] = kv.blocks_free;
    j["last_block_unused"] = kv.last_block_unused;
    j["block_table"] = kv.block_table;
  }
  return j;
}

json context_json(const PolicyEvent& e, const Tokenizer& tok) {
  std::string text;
  std::int32_t prev = -1;
  for (auto id : e.dropped_ids) {
    text += tok.decode(prev, id);
    prev = id;
  }
  json j = {{"type", "context"}, {"policy", e.policy}, {"step", e.step}, {"limit", e.limit},
            {"dropped", {{"from", e.dropped_from}, {"to", e.dropped_to}, {"ids", e.dropped_ids}, {"text", text}}},
            {"kept", e.kept}, {"detail", e.detail}};
  if (e.policy == "prune-turns") j["turns"] = e.turns;
  return j;
}

json summary_json(const Summary& s) {
  return {{"type", "summary"}, {"generated", s.generated}, {"stop_reason", s.stop_reason},
          {"ttft_ms", s.ttft_ms}, {"prefill_tok_s", s.prefill_tok_s}, {"decode_tok_s", s.decode_tok_s},
          {"policy_firings", s.policy_firings}};
}

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
  write({{"type", "error"}, {"message", message}});
  return finish_cut_short();
}

std::string JsonlWriter::interrupted(const std::string& signal) {
  write({{"type", "interrupted"}, {"signal", signal}, {"message", "interrupted by " + signal}});
  return finish_cut_short();
}

}  // namespace glassbox::traces
