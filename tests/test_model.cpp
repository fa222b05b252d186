// The forward pass against llama2.c's golden logits, the two checkpoint formats, and checkpoint validation.
#define BOOST_TEST_MODULE model
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>
#include <fstream>
#include <random>

#include "glassbox/error.hpp"
#include "glassbox/model.hpp"
#include "glassbox/registry.hpp"
#include "model_fixture.hpp"
#include "support.hpp"

namespace bdata = boost::unit_test::data;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using gbtest::golden;  // llama2.c's greedy golden for stories260K (model_fixture.hpp)

// Loads stories260K once for the whole suite.
using Stories = gbtest::Stories260K;
const Stories& stories() {
  static Stories s;
  return s;
}

// Feeds the golden inputs through `model` in blocks of `block` positions and checks the logits
// after every block's last position against llama2.c's.
void check_against_golden(const glassbox::ModelSource& ckpt, const json& g, int block) {
  glassbox::Transformer model(ckpt.config(), ckpt.weights(), block);
  auto cache = stories().module("kv-cache");
  const auto& steps = g["steps"];
  std::vector<std::int32_t> inputs;
  for (const auto& s : steps) inputs.push_back(s["input"].get<std::int32_t>());
  double worst = 0;
  for (std::size_t p = 0; p < inputs.size(); p += block) {
    const std::size_t n = std::min<std::size_t>(block, inputs.size() - p);
    auto logits = model.forward(std::span(inputs).subspan(p, n), static_cast<int>(p), *cache);
    const auto& want = steps[p + n - 1]["logits"];
    BOOST_REQUIRE_EQUAL(want.size(), logits.size());
    for (std::size_t i = 0; i < logits.size(); ++i) worst = std::max(worst, std::abs(double(logits[i]) - want[i].get<double>()));
  }
  BOOST_TEST_MESSAGE("prompt '" << g["prompt"].get<std::string>() << "' block " << block << ": max |Δlogit| = " << worst);
  BOOST_TEST(worst <= 1e-4);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(golden_logits, *boost::unit_test::precondition(gbtest::NeedsShared()))

// Every position of every golden prompt, one token at a time (the decode path) and in blocks
// (the prefill path): both must give llama2.c's logits to 1e-4.
BOOST_DATA_TEST_CASE(forward_matches_llama2c, bdata::xrange(4) * bdata::make({1, 7, 64}), prompt, block) {
  const auto g = golden();
  BOOST_REQUIRE_LT(static_cast<std::size_t>(prompt), g.size());
  check_against_golden(*stories().ckpt, g[prompt], block);
}

BOOST_AUTO_TEST_CASE(header_is_read_as_documented) {
  const auto& c = stories().ckpt->config();
  BOOST_TEST(c.dim == 64);
  BOOST_TEST(c.hidden_dim == 172);
  BOOST_TEST(c.n_layers == 5);
  BOOST_TEST(c.n_heads == 8);
  BOOST_TEST(c.n_kv_heads == 4);
  BOOST_TEST(c.vocab_size == 512);
  BOOST_TEST(c.seq_len == 512);
  BOOST_TEST(c.shared_classifier);
  BOOST_TEST(c.format_version == 0);
}

// Rewrites stories260K in the "ak42" version-1 layout (norms first, no RoPE tables) and checks
// that it loads to the same weights and gives the same logits.
BOOST_AUTO_TEST_CASE(version1_export_loads_identically) {
  const auto& src = *stories().ckpt;
  const auto& c = src.config();
  const auto& w = src.weights();
  const fs::path dir = gbtest::temp_dir("v1");
  const fs::path out = dir / "stories260K-v1.bin";
  {
    std::ofstream f(out, std::ios::binary);
    auto i32 = [&](std::int32_t v) { f.write(reinterpret_cast<const char*>(&v), 4); };
    const std::uint32_t magic = 0x616b3432;
    f.write(reinterpret_cast<const char*>(&magic), 4);
    i32(1);
    for (int v : {c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads, c.vocab_size, c.seq_len}) i32(v);
    f.put(1);  // shared classifier
    const std::string pad(256 - 4 - 4 - 28 - 1, '\0');
    f.write(pad.data(), pad.size());
    auto put = [&](const glassbox::Tensor& t) { f.write(reinterpret_cast<const char*>(t.data), static_cast<std::streamsize>(t.bytes)); };
    // One kind of tensor for every layer in turn, as the format stores it.
    auto put_all = [&](glassbox::Tensor glassbox::LayerWeights::*m) { for (const auto& l : w.layers) put(l.*m); };
    using LW = glassbox::LayerWeights;
    put_all(&LW::rms_att); put_all(&LW::rms_ffn); put(w.rms_final); put(w.token_embedding);
    put_all(&LW::wq); put_all(&LW::wk); put_all(&LW::wv); put_all(&LW::wo); put_all(&LW::w1); put_all(&LW::w2); put_all(&LW::w3);
  }
  auto v1p = glassbox::ModelSource::open(out);
  const glassbox::ModelSource& v1 = *v1p;
  BOOST_TEST(v1.config().format_version == 1);
  BOOST_TEST(v1.config().shared_classifier);
  check_against_golden(v1, golden()[0], 64);
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_SUITE_END()

// ---- Bad checkpoints: each must be refused with a one-line ModelError naming the file ----

namespace {

std::string header7(std::int32_t dim, std::int32_t hidden, std::int32_t layers, std::int32_t heads,
                    std::int32_t kv, std::int32_t vocab, std::int32_t seq) {
  std::string s(28, '\0');
  const std::int32_t v[7] = {dim, hidden, layers, heads, kv, vocab, seq};
  std::memcpy(s.data(), v, 28);
  return s;
}

struct BadCase {
  std::string name;
  std::string bytes;
  std::string expect;  // a fragment of the message
};

std::ostream& operator<<(std::ostream& os, const BadCase& c) { return os << c.name; }

std::vector<BadCase> bad_cases() {
  std::vector<BadCase> v;
  std::mt19937 g(12345);
  std::string random(1 << 20, '\0');
  for (auto& ch : random) ch = static_cast<char>(g());
  v.push_back({"random-bytes", random, "header field"});
  v.push_back({"empty", "", "header of at least 28 bytes"});
  v.push_back({"short-header", std::string(10, '\x01'), "header of at least 28 bytes"});
  v.push_back({"zero-dims", header7(0, 0, 0, 0, 0, 0, 0) + std::string(1024, '\0'), "dim = 0"});
  v.push_back({"absurd-dim", header7(1 << 30, 172, 5, 8, 4, 512, 512), "dim = 1073741824"});
  v.push_back({"absurd-layers", header7(64, 172, 100000, 8, 4, 512, 512), "n_layers = 100000"});
  v.push_back({"negative-seq", header7(64, 172, 5, 8, 4, 512, -3), "seq_len = -3"});
  v.push_back({"heads-not-dividing-dim", header7(64, 172, 5, 7, 7, 512, 512), "does not divide dim"});
  v.push_back({"kv-heads-not-dividing-heads", header7(64, 172, 5, 8, 3, 512, 512), "does not divide n_heads"});
  v.push_back({"header-only", header7(64, 172, 5, 8, 4, 512, 512), "implies"});
  std::string v2(256, '\0');
  const std::uint32_t magic = 0x616b3432;
  const std::int32_t ver = 2;
  std::memcpy(v2.data(), &magic, 4);
  std::memcpy(v2.data() + 4, &ver, 4);
  v.push_back({"ak42-version-2", v2, "version 2 is not supported"});
  if (gbtest::shared_dir()) {
    const std::string real = gbtest::read_file(gbtest::shared("models/stories260K.bin"));
    v.push_back({"truncated", real.substr(0, real.size() / 2), "truncated"});
    v.push_back({"trailing-bytes", real + "xyz", "implies"});
    std::string nan = real;
    const float q = std::nanf("");
    std::memcpy(nan.data() + 28 + 4 * 1000, &q, 4);
    v.push_back({"nan-weight", nan, "weight #1000 is not a finite number"});
  }
  return v;
}

}  // namespace

BOOST_DATA_TEST_CASE(bad_checkpoint_is_refused, bdata::make(bad_cases()), c) {
  const fs::path dir = gbtest::temp_dir("bad-" + c.name);
  const fs::path file = dir / (c.name + ".bin");
  gbtest::write_file(file, c.bytes);
  try {
    auto ck = glassbox::ModelSource::open(file);
    BOOST_FAIL("checkpoint " << c.name << " was accepted");
  } catch (const glassbox::ModelError& e) {
    const std::string msg = e.what();
    BOOST_TEST_MESSAGE(msg);
    BOOST_TEST(msg.find(file.string()) != std::string::npos, "message names the file: " << msg);
    BOOST_TEST(msg.find(c.expect) != std::string::npos, "message says '" << c.expect << "': " << msg);
    BOOST_TEST(msg.find('\n') == std::string::npos);
  }
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(missing_checkpoint_is_refused) {
  BOOST_CHECK_EXCEPTION(glassbox::ModelSource::open("/nonexistent/model.bin"), glassbox::ModelError, [](const auto& e) {
    return std::string(e.what()).find("/nonexistent/model.bin: cannot open") != std::string::npos;
  });
}
