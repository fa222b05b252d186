// Sampler "grammar" (llama.cpp's grammar sampler): removes every candidate whose text cannot continue a
// parse of a GBNF grammar (or of a JSON schema converted to one) from the text generated so far; once
// the grammar is complete only end-of-generation tokens remain, so generation ends at the normal stop.
#include <fstream>
#include <sstream>

#include <glassbox/file_io.hpp>
#include <glassbox/tokenizer.hpp>

#include "grammar_engine.hpp"
#include "stage.hpp"

namespace {

using namespace glassbox;
namespace gr = glassbox::grammar;

std::string read_text(const std::string& param, const std::string& path) {
  if (auto why = not_a_regular_file(path))
    throw ConfigError("sampler 'grammar': " + param + " = '" + path + "': " + *why);
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  if (!in && !in.eof()) throw ConfigError("sampler 'grammar': " + param + " = '" + path + "': cannot be read");
  return s.str();
}

// The text generated so far, for messages: its last 60 bytes, control characters escaped.
std::string shown(const std::string& text) {
  std::string tail = text.size() > 60 ? text.substr(text.size() - 60) : text;
  std::string out = text.size() > 60 ? "..." : "";
  for (const char c : tail) {
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\'') out += "\\'";
    else if (static_cast<unsigned char>(c) < 0x20) out += '?';
    else out += c;
  }
  return out;
}

class GrammarStage final : public samplers::Stage {
 public:
  GrammarStage(Params p, gr::Grammar g, std::string source)
      : Stage("grammar", std::move(p)), grammar_(std::make_unique<gr::Grammar>(std::move(g))), rec_(*grammar_),
        source_(std::move(source)) {}
  // Added by --grammar / --json-schema, the grammar masks the raw distribution before any other stage
  // (llama.cpp's grammar-first sampling): truncating stages then only see tokens the grammar allows.
  // Written into --sampler, it stays where the user put it.
  bool runs_first() const override { return true; }

  // Each token's text, decoded once: its code points (0-closed, all in one array) and the unfinished
  // UTF-8 character it may end with. After BOS a SentencePiece vocabulary drops the leading space;
  // those few texts are kept apart.
  void bind(const Tokenizer& vocab) override {
    vocab_ = &vocab;
    const auto n = static_cast<std::size_t>(vocab.vocab_size());
    bos_ = vocab.bos_id();
    text_.assign(n, {});
    offset_.assign(n, 0);
    partial_.assign(n, {});
    eog_.assign(n, false);
    code_points_.clear();
    after_bos_.assign(n, -1);
    after_bos_text_.clear();
    for (auto id : vocab.eog_ids())
      if (id >= 0 && static_cast<std::size_t>(id) < n) eog_[id] = true;
    for (std::size_t id = 0; id < n; ++id) {
      text_[id] = std::string(vocab.decode(-1, static_cast<std::int32_t>(id)));
      auto [cps, partial] = gr::decode_utf8(text_[id], {});
      offset_[id] = code_points_.size();
      partial_[id] = partial;
      code_points_.insert(code_points_.end(), cps.begin(), cps.end());
      if (bos_ >= 0) {
        std::string_view after = vocab.decode(bos_, static_cast<std::int32_t>(id));
        if (after != text_[id]) {
          after_bos_[id] = static_cast<std::int32_t>(after_bos_text_.size());
          after_bos_text_.emplace_back(after);
        }
      }
    }
  }

  void accept(std::int32_t token) override {
    // Prompt tokens come before the first apply(): the grammar covers only what is generated.
    const std::int32_t prev = last_;
    last_ = token;
    if (!pending_) return;
    pending_ = false;
    if (!vocab_ || token < 0 || static_cast<std::size_t>(token) >= eog_.size() || eog_[token]) return;
    const std::string text = text_of(prev, token);
    if (!rec_.accept_text(text))
      throw ConfigError("sampler 'grammar': token " + std::to_string(token) + " ('" + shown(text) + "') cannot continue " +
                        source_ + " after '" + shown(generated_) + "' (a stage after the grammar, or a forced token, chose it)");
    generated_ += text;
  }

  void reset() override {
    rec_.reset();
    pending_ = false;
    last_ = -1;
    generated_.clear();
  }

  void apply(Candidates& c, Rng&) override {
    if (!vocab_) throw ConfigError("sampler 'grammar': it needs the vocabulary's token texts, and none was given to the chain");
    pending_ = true;
    const bool complete = rec_.complete();
    const bool after_bos = last_ >= 0 && last_ == bos_;
    const bool partial = rec_.partial().n_remain != 0;
    keep_.assign(c.data.size(), 1);
    texts_.clear();
    scratch_.clear();
    for (std::size_t i = 0; i < c.data.size(); ++i) {
      const std::int32_t id = c.data[i].id;
      if (id < 0 || static_cast<std::size_t>(id) >= eog_.size() || c.data[i].logit == -INFINITY) {
        keep_[i] = 0;
        continue;
      }
      if (eog_[id]) {
        keep_[i] = complete;  // the end is allowed exactly when the grammar is complete
        continue;
      }
      const std::uint32_t* cps = code_points_.data() + offset_[id];
      gr::PartialUtf8 rest = partial_[id];
      if (partial || (after_bos && after_bos_[id] >= 0)) {
        // Texts that depend on what came before are decoded now (a few tokens, or one step).
        auto [v, p] = gr::decode_utf8(text_of(last_, id), rec_.partial());
        scratch_.push_back(std::move(v));
        cps = scratch_.back().data();
        rest = p;
      }
      if (*cps == 0 && rest.n_remain == 0) {  // an empty text (a control token) never advances the parse
        keep_[i] = 0;
        continue;
      }
      texts_.push_back({i, cps, rest});
    }
    for (const auto& r : rec_.reject(texts_)) keep_[r.index] = 0;
    std::size_t kept = 0;
    for (auto k : keep_) kept += k;
    if (kept == 0) {
      const bool whole = vocab_ && c.data.size() == static_cast<std::size_t>(vocab_->vocab_size());
      throw ConfigError(std::string("grammar: ") +
                        (whole ? "no token of the vocabulary" : "none of the " + std::to_string(c.data.size()) + " candidates left by earlier stages") +
                        " can continue " + source_ + ", after '" + shown(generated_) + "'" +
                        (complete ? " (the grammar is complete, but no end-of-generation token is left to end on)" : ""));
    }
    std::size_t w = 0;
    for (std::size_t i = 0; i < c.data.size(); ++i)
      if (keep_[i]) c.data[w++] = c.data[i];
    c.data.resize(w);  // order kept: a sorted array stays sorted
  }

 private:
  std::string text_of(std::int32_t prev, std::int32_t id) const {
    if (prev >= 0 && prev == bos_ && after_bos_[id] >= 0) return after_bos_text_[after_bos_[id]];
    return text_[id];
  }

  std::unique_ptr<gr::Grammar> grammar_;  // owned here, referenced by rec_
  gr::Recognizer rec_;
  std::string source_;
  const Tokenizer* vocab_ = nullptr;
  std::int32_t bos_ = -1;
  std::vector<std::string> text_;
  std::vector<std::size_t> offset_;
  std::vector<gr::PartialUtf8> partial_;
  std::vector<char> eog_;
  std::vector<std::uint32_t> code_points_;
  std::vector<std::int32_t> after_bos_;    // index into after_bos_text_ of the text after BOS, -1: the same
  std::vector<std::string> after_bos_text_;
  // The run's state.
  bool pending_ = false;  // apply() ran since the last accept(): the next accepted token is generated
  std::int32_t last_ = -1;
  std::string generated_;
  // One step's buffers.
  std::vector<char> keep_;
  std::vector<gr::TokenText> texts_;
  std::vector<std::vector<std::uint32_t>> scratch_;
};

void register_factories(Registrar& r) {
  r.add_sampler({"grammar",
                 "keep only candidates that continue a GBNF grammar (or a JSON schema); llama.cpp's grammar sampler",
                 {{"file", ParamType::String, "", "GBNF grammar file (glassbox run --grammar FILE)", {}, {}},
                  {"gbnf", ParamType::String, "", "GBNF grammar text (instead of a file; handy in YAML)", {}, {}},
                  {"schema_file", ParamType::String, "", "JSON schema file, converted to a grammar (--json-schema FILE)", {}, {}},
                  {"json_schema", ParamType::String, "", "JSON schema text, converted to a grammar", {}, {}}},
                 "file"},
                [](const Params& p, const PluginContext&) {
                  std::vector<std::string> given;
                  for (const char* k : {"file", "gbnf", "schema_file", "json_schema"})
                    if (!p.get_string(k).empty()) given.emplace_back(k);
                  if (given.size() != 1)
                    throw ConfigError("sampler 'grammar': expected exactly one of file, gbnf, schema_file, json_schema" +
                                      (given.empty() ? std::string(" (none given)") : " (given: " + given[0] + " and " + given[1] + ")"));
                  const std::string& k = given[0];
                  const std::string& v = p.get_string(k);
                  std::string gbnf, source;
                  if (k == "file") gbnf = read_text(k, v), source = v;
                  else if (k == "gbnf") gbnf = v, source = "grammar";
                  else {
                    const std::string schema = k == "schema_file" ? read_text(k, v) : v;
                    source = k == "schema_file" ? v : "json_schema";
                    gbnf = gr::json_schema_to_gbnf(schema, source);
                    source += " (as a grammar)";
                  }
                  gr::Grammar g = gr::parse(gbnf, source);
                  return std::make_unique<GrammarStage>(p, std::move(g), source);
                });
}

}  // namespace

GLASSBOX_MODULE("grammar", "grammar-constrained sampling (llama.cpp's GBNF; JSON schemas)", register_factories)
