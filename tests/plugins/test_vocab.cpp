// A test-only tokenizer module that chooses itself for a made-up vocabulary family
// (tokenizer.ggml.model = "glassbox-test"), so the tests see core pick a tokenizer it has never
// heard of; its vocabulary size comes from the factory's context. Two more tokenizers let the
// tests make the choice ambiguous, or make a test throw, by a key of the metadata.
#include <stdexcept>

#include <glassbox/error.hpp>
#include <glassbox/plugin.hpp>

namespace {

// One byte per token: enough of a tokenizer for a model to load and run with.
class ByteVocab final : public glassbox::Tokenizer {
 public:
  explicit ByteVocab(std::int32_t n) : n_(n) {
    for (std::int32_t i = 0; i < n; ++i) pieces_.push_back(std::string(1, static_cast<char>(i % 256)));
  }
  using Tokenizer::encode;
  std::vector<std::int32_t> encode(std::string_view text, const glassbox::EncodeOptions&) const override {
    std::vector<std::int32_t> ids;
    for (unsigned char ch : text) ids.push_back(ch % n_);
    return ids;
  }
  std::string_view decode(std::int32_t, std::int32_t id) const override { return piece(id); }
  std::string_view piece(std::int32_t id) const override { return pieces_.at(static_cast<std::size_t>(id)); }
  std::int32_t vocab_size() const override { return n_; }
  std::int32_t bos_id() const override { return -1; }
  std::int32_t eos_id() const override { return -1; }
  bool add_bos() const override { return false; }

 private:
  std::int32_t n_;
  std::vector<std::string> pieces_;
};

bool is_test_family(const glassbox::Metadata& m) { return m.get_string("tokenizer.ggml.model") == "glassbox-test"; }

void register_factories(glassbox::Registrar& r) {
  auto make = [](const glassbox::Params&, const glassbox::PluginContext& c) -> std::unique_ptr<glassbox::Tokenizer> {
    if (c.vocab_size <= 0) throw glassbox::ConfigError("tokenizer 'test-vocab': needs the model's vocabulary size");
    return std::make_unique<ByteVocab>(c.vocab_size);
  };
  r.add_tokenizer({"test-vocab", "one byte per token, for the made-up family glassbox-test", {}, ""}, make,
                  {"glassbox-test", is_test_family});
  // Accepts the same family only when the model carries glassbox.test.both: two candidates.
  r.add_tokenizer({"test-vocab-too", "as test-vocab", {}, ""}, make,
                  {"glassbox-test", [](const glassbox::Metadata& m) { return is_test_family(m) && m.has("glassbox.test.both"); }});
  // A test that throws when the model carries glassbox.test.throw.
  r.add_tokenizer({"test-vocab-throws", "as test-vocab", {}, ""}, make,
                  {"anything", [](const glassbox::Metadata& m) -> bool {
                     if (m.has("glassbox.test.throw")) throw std::runtime_error("accepts exploded");
                     return false;
                   }});
}

}  // namespace

GLASSBOX_MODULE("test-vocab", "test-only self-selecting tokenizers", register_factories)
