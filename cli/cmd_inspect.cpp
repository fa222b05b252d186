// `glassbox inspect`: what a model file holds (format, config, metadata, tensors, parameter counts,
// vocabulary) as readable text or, with --json, as one JSON object for tools.
#include <algorithm>
#include <iomanip>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "glassbox/error.hpp"
#include "glassbox/model/gguf.hpp"
#include "glassbox/model/mapped_file.hpp"
#include "glassbox/model/model_source.hpp"
#include "glassbox/pipeline.hpp"
#include "glassbox/traces/writer.hpp"

namespace glassbox::cli {

namespace {

using nlohmann::json;

struct TensorRow {
  std::string name;
  DType type;
  std::vector<std::int64_t> shape;  // row-major, outermost first
  std::uint64_t offset;             // from the start of the tensor data
  std::size_t bytes;
  std::int64_t numel;
};

// Everything `inspect` shows, gathered once and printed as text or JSON.
struct Report {
  std::string path, format;
  int version = 0;
  std::uint64_t file_bytes = 0, data_offset = 0, alignment = 0;
  std::string architecture;
  std::optional<Config> config;
  std::string config_error;  // why glassbox cannot run a file it can still list
  Metadata metadata;
  std::vector<TensorRow> tensors;
  std::string sha256;  // with --sha256
};

TensorRow row_of(const Tensor& t, std::uint64_t offset) {
  return {t.name, t.dtype, {t.shape.begin(), t.shape.begin() + t.n_dims}, offset, t.bytes, t.numel()};
}

json meta_json(const MetaValue& v, std::size_t max_items) {
  if (auto* i = std::get_if<std::int64_t>(&v.value)) return *i;
  if (auto* u = std::get_if<std::uint64_t>(&v.value)) return *u;
  if (auto* d = std::get_if<double>(&v.value)) return *d;
  if (auto* b = std::get_if<bool>(&v.value)) return *b;
  if (auto* s = std::get_if<std::string>(&v.value)) return *s;
  json head = json::array();
  const std::size_t n = v.size();
  for (std::size_t i = 0; i < n && i < max_items; ++i) head.push_back(meta_json(v.item(i), max_items));
  return json{{"elem_type", meta_type_name(v.elem)}, {"count", n}, {"head", head}};
}

std::string shape_text(const std::vector<std::int64_t>& s) {
  std::string out;
  for (auto d : s) out += (out.empty() ? "" : " × ") + std::to_string(d);
  return out;
}

// tokenizer.* keys, summarised; an empty object when the file carries no vocabulary.
json tokenizer_summary(const Metadata& m) {
  auto model = m.get_string("tokenizer.ggml.model");
  if (!model) return json::object();
  const auto* tokens = m.find("tokenizer.ggml.tokens");
  const std::size_t n = tokens && tokens->is_array() ? tokens->size() : 0;
  json t{{"model", *model}, {"vocab_size", n}};
  auto piece = [&](std::int64_t id) -> json {
    if (!tokens || !tokens->is_array() || id < 0 || static_cast<std::size_t>(id) >= n) return nullptr;
    const MetaValue item = tokens->item(static_cast<std::size_t>(id));
    const auto* s = std::get_if<std::string>(&item.value);
    return s ? json(*s) : json(nullptr);
  };
  for (const char* k : {"bos", "eos"}) {
    auto id = m.get_int(std::string("tokenizer.ggml.") + k + "_token_id");
    if (id && *id != 0xFFFFFFFFll && *id != -1) t[k] = json{{"id", *id}, {"piece", piece(*id)}};
    else t[k] = nullptr;
  }
  const auto tmpl = m.get_string("tokenizer.chat_template");
  t["chat_template"] = tmpl.has_value();
  if (tmpl) t["chat_template_first_line"] = tmpl->substr(0, tmpl->find('\n'));
  return t;
}

Report gather(const std::string& path, bool digest) {
  Report r;
  r.path = path;
  const auto mapped = std::make_shared<const MappedFile>(path);
  const MappedFile& file = *mapped;
  r.file_bytes = file.size();
  // The digest a trace header names, computed as a traced run does: beside the check of every
  // weight, from the same mapping (so `time glassbox inspect --sha256` is a run's load + validate + hash).
  std::optional<DigestThread> sha256;  // stopped if gathering throws
  if (digest) sha256.emplace(mapped);
  std::unique_ptr<ModelSource> src;
  std::unique_ptr<GgufFile> gguf;
  if (is_gguf(file.data(), file.size())) {
    // The container alone is enough to list a file glassbox cannot run (another architecture).
    gguf = std::make_unique<GgufFile>(path, file.data(), file.size());
    r.format = "gguf";
    r.version = static_cast<int>(gguf->version());
    r.data_offset = gguf->data_offset();
    r.alignment = gguf->alignment();
    r.architecture = gguf->metadata().get_string("general.architecture").value_or("");
    for (const auto& info : gguf->tensors()) r.tensors.push_back(row_of(gguf->tensor(info), info.offset));
    try {
      src = ModelSource::open(mapped);
      r.config = src->config();
    } catch (const Error& e) {
      r.config_error = e.what();
    }
  } else {
    src = ModelSource::open(mapped);  // a bad llama2.c header is a bad file: nothing else to show
    const Config& c = src->config();
    r.format = "llama2c";
    r.version = c.format_version;
    r.data_offset = c.format_version == 0 ? 28 : 256;
    r.architecture = c.architecture;
    r.config = c;
    const Weights& w = src->weights();
    std::vector<const Tensor*> all{&w.token_embedding, &w.rms_final};
    if (w.wcls.data != w.token_embedding.data) all.push_back(&w.wcls);
    for (const auto& l : w.layers)
      for (const Tensor* t : {&l.rms_att, &l.wq, &l.wk, &l.wv, &l.wo, &l.rms_ffn, &l.w1, &l.w2, &l.w3}) all.push_back(t);
    // File order: each kind is stored for all layers at once, so sort by position.
    std::sort(all.begin(), all.end(), [](const Tensor* a, const Tensor* b) { return a->data < b->data; });
    const std::byte* base = src->file().data() + r.data_offset;  // the views point into src's own mapping
    for (const Tensor* t : all) r.tensors.push_back(row_of(*t, static_cast<std::uint64_t>(t->data - base)));
  }
  r.metadata = gguf ? gguf->metadata() : src->metadata();  // copies: they outlive the mapping
  if (sha256) r.sha256 = sha256->digest().get();
  return r;
}

// The architecture's description and resolved facts (docs/architectures.md), as the trace header has them.
json arch_json(const Config& c) {
  json a = json::object();
  for (const auto& [k, v] : describe_config(c)) a[k] = v;
  return a;
}

json config_json(const Config& c) {
  return {{"dim", c.dim}, {"hidden_dim", c.hidden_dim}, {"n_layers", c.n_layers}, {"n_heads", c.n_heads},
          {"n_kv_heads", c.n_kv_heads}, {"head_size", c.head_size()}, {"vocab_size", c.vocab_size},
          {"context_length", c.seq_len}, {"rope_theta", c.rope_theta},
          {"rope_scaling", {{"type", c.rope_scaling.type}, {"factor", c.rope_scaling.factor}}},
          {"norm_eps", c.norm_eps}, {"shared_classifier", c.shared_classifier}, {"arch", arch_json(c)}};
}

struct TypeTotals {
  int tensors = 0;
  std::int64_t params = 0;
  std::uint64_t bytes = 0;
};

std::map<std::string, TypeTotals> totals_by_type(const Report& r) {
  std::map<std::string, TypeTotals> m;
  for (const auto& t : r.tensors) {
    auto& x = m[std::string(dtype_name(t.type))];
    ++x.tensors;
    x.params += t.numel;
    x.bytes += t.bytes;
  }
  return m;
}

std::string format_label(const Report& r) {
  if (r.format == "gguf") return "GGUF v" + std::to_string(r.version);
  return r.version == 0 ? "llama2.c (legacy header)" : "llama2.c (\"ak42\" v1 header)";
}

void print_json(const Report& r) {
  json j{{"file", r.path}, {"format", r.format}, {"version", r.version}, {"format_label", format_label(r)},
         {"file_bytes", r.file_bytes}, {"data_offset", r.data_offset}, {"architecture", r.architecture}};
  if (r.format == "gguf") j["alignment"] = r.alignment;
  if (!r.sha256.empty()) j["sha256"] = r.sha256;
  j["config"] = r.config ? config_json(*r.config) : json(nullptr);
  if (!r.config_error.empty()) j["config_error"] = r.config_error;
  json meta = json::array();
  for (const auto& [key, v] : r.metadata.entries())
    meta.push_back({{"key", key}, {"type", meta_type_name(v.type)}, {"value", meta_json(v, 8)}});
  j["metadata"] = meta;
  json tensors = json::array();
  std::int64_t params = 0;
  for (const auto& t : r.tensors) {
    std::vector<std::int64_t> ne(t.shape.rbegin(), t.shape.rend());
    tensors.push_back({{"name", t.name}, {"type", dtype_name(t.type)}, {"shape", t.shape}, {"ne", ne},
                       {"offset", t.offset}, {"file_offset", r.data_offset + t.offset}, {"bytes", t.bytes}});
    params += t.numel;
  }
  j["tensors"] = tensors;
  j["parameters"] = params;
  json by_type = json::object();
  for (const auto& [name, x] : totals_by_type(r))
    by_type[name] = {{"tensors", x.tensors}, {"parameters", x.params}, {"bytes", x.bytes}};
  j["by_type"] = by_type;
  const json tok = tokenizer_summary(r.metadata);
  j["tokenizer"] = tok.empty() ? json(nullptr) : tok;
  std::cout << traces::dump(j) << "\n";
}

void print_text(const Report& r) {
  std::ostringstream o;
  auto field = [&](const char* name) -> std::ostream& { return o << std::left << std::setw(14) << name; };
  field("file") << r.path << " (" << r.file_bytes << " bytes)\n";
  if (!r.sha256.empty()) field("sha256") << r.sha256 << "\n";
  field("format") << format_label(r);
  if (r.format == "gguf") o << ", alignment " << r.alignment;
  o << ", tensor data at byte " << r.data_offset << "\n";
  field("architecture") << (r.architecture.empty() ? "(none)" : r.architecture) << "\n";
  if (r.config) {
    const Config& c = *r.config;
    field("config") << "dim " << c.dim << ", hidden_dim " << c.hidden_dim << ", layers " << c.n_layers << ", heads "
                    << c.n_heads << ", kv heads " << c.n_kv_heads << ", head size " << c.head_size() << ", vocab "
                    << c.vocab_size << "\n";
    field("") << "context " << c.seq_len << ", rope θ " << c.rope_theta;
    if (c.rope_scaling.type != "none") o << " (" << c.rope_scaling.type << " scaling ×" << c.rope_scaling.factor << ")";
    o << ", " << (c.arch.norm == NormKind::LayerNorm ? "norm" : "rms") << " eps " << c.norm_eps << ", classifier "
      << (c.shared_classifier ? "shared with the token embedding" : "separate") << "\n";
    // The recipe: what differs from llama, then the values that go with it (docs/architectures.md).
    std::string recipe;
    for (const auto& [k, v] : describe(c.arch, true)) recipe += (recipe.empty() ? "" : ", ") + k + " " + v;
    field("arch") << (recipe.empty() ? "llama's recipe" : recipe) << "\n";
    std::string facts;
    const auto all = describe(c.arch);
    for (const auto& kv : describe_config(c)) {
      const bool desc = std::any_of(all.begin(), all.end(), [&](const auto& d) { return d.first == kv.first; });
      if (!desc) facts += (facts.empty() ? "" : ", ") + kv.first + " " + kv.second;
    }
    field("") << facts << "\n";
  } else {
    field("config") << "not runnable by glassbox: " << r.config_error << "\n";
  }
  const json tok = tokenizer_summary(r.metadata);
  if (tok.empty()) {
    field("tokenizer") << "none in the file" << (r.format == "llama2c" ? " (llama2.c uses a separate tokenizer.bin)" : "") << "\n";
  } else {
    field("tokenizer") << tok["model"].get<std::string>() << ", " << tok["vocab_size"] << " tokens";
    for (const char* k : {"bos", "eos"}) {
      o << ", " << k << " ";
      if (tok[k].is_null()) o << "none";
      else o << tok[k]["id"] << (tok[k]["piece"].is_null() ? "" : " " + traces::dump(tok[k]["piece"]));
    }
    o << "\n";
    field("") << "chat template: ";
    if (tok["chat_template"].get<bool>()) o << "yes, first line " << traces::dump(tok["chat_template_first_line"]) << "\n";
    else o << "none\n";
  }
  std::int64_t params = 0;
  std::uint64_t bytes = 0;
  for (const auto& t : r.tensors) params += t.numel, bytes += t.bytes;
  field("parameters") << params << " in " << r.tensors.size() << " tensors, " << bytes << " bytes\n";
  for (const auto& [name, x] : totals_by_type(r))
    field("") << std::left << std::setw(5) << name << " " << x.tensors << (x.tensors == 1 ? " tensor, " : " tensors, ") << x.params << " parameters, "
              << x.bytes << " bytes\n";

  const auto& entries = r.metadata.entries();
  std::size_t kw = 3;
  for (const auto& [key, v] : entries) kw = std::max(kw, key.size());
  o << "\nmetadata (" << entries.size() << " keys" << (r.format == "llama2c" ? ", implied by the header" : "") << ")\n";
  o << "  " << std::left << std::setw(static_cast<int>(kw)) << "key" << "  " << std::setw(8) << "type" << "  value\n";
  for (const auto& [key, v] : entries) {
    std::string type(meta_type_name(v.type));
    if (v.type == MetaType::Array) type = "[" + std::string(meta_type_name(v.elem)) + "]";
    o << "  " << std::setw(static_cast<int>(kw)) << key << "  " << std::setw(8) << type << "  " << v.to_string(8) << "\n";
  }

  std::size_t nw = 4, sw = 5;
  for (const auto& t : r.tensors) nw = std::max(nw, t.name.size()), sw = std::max(sw, shape_text(t.shape).size());
  o << "\ntensors (" << r.tensors.size() << "; shape is rows × cols, offset from the start of the tensor data)\n";
  o << "  " << std::setw(static_cast<int>(nw)) << "name" << "  " << std::setw(5) << "type" << "  "
    << std::setw(static_cast<int>(sw)) << "shape" << "  " << std::right << std::setw(12) << "offset" << "  "
    << std::setw(10) << "bytes" << "\n";
  for (const auto& t : r.tensors)
    o << "  " << std::left << std::setw(static_cast<int>(nw)) << t.name << "  " << std::setw(5) << dtype_name(t.type)
      << "  " << std::setw(static_cast<int>(sw)) << shape_text(t.shape) << "  " << std::right << std::setw(12)
      << t.offset << "  " << std::setw(10) << t.bytes << "\n";
  std::cout << o.str();
}

}  // namespace

void add_inspect_command(CLI::App& app) {
  struct Opts {
    std::string file;
    bool json = false;
    bool sha256 = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("inspect", "show what a model file (GGUF or llama2.c) holds: config, metadata, tensors");
  cmd->add_option("file", o->file, "the model file")->required();
  cmd->add_flag("--json", o->json, "print one JSON object instead of text");
  cmd->add_flag("--sha256", o->sha256, "also the file's SHA-256, the digest trace headers name (from the digest cache when it holds the file)");
  cmd->callback([o] {
    const Report r = gather(o->file, o->sha256);
    if (o->json) print_json(r);
    else print_text(r);
  });
}

}  // namespace glassbox::cli
