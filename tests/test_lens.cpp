// The logit lens (run --trace-lens): at every step and block its top tokens and probabilities equal an
// independent float64 forward pass written here (the checkpoint read byte by byte, no glassbox kernel or
// loader), and the last block's point is exactly the step's own distribution.
#define BOOST_TEST_MODULE lens
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <sstream>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "support.hpp"

namespace fs = std::filesystem;
namespace bdata = boost::unit_test::data;
using nlohmann::json;
using gbtest::run_cli;

namespace {

// ---- a float64 llama forward pass, as the llama2.c paper-style reference: nothing shared with glassbox ----

struct Ref {
  int dim = 0, hidden = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, vocab = 0, seq_len = 0;
  bool shared = true;
  std::vector<float> emb, rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3, rms_final, wcls;
  int head_size() const { return dim / n_heads; }
  int kv_dim() const { return n_kv_heads * head_size(); }
};

// llama2.c checkpoints: legacy (7 int32 header, vocab_size < 0 for an unshared classifier) or version 1
// ("ak42" magic, 256-byte header, norms first).
Ref read_llama2c(const fs::path& path) {
  const std::string data = gbtest::read_file(path);
  Ref r;
  std::size_t off = 0;
  auto i32 = [&](std::size_t at) {
    std::int32_t v;
    std::memcpy(&v, data.data() + at, 4);
    return v;
  };
  const bool v1 = static_cast<std::uint32_t>(i32(0)) == 0x616b3432u;
  const std::size_t h = v1 ? 8 : 0;
  r.dim = i32(h), r.hidden = i32(h + 4), r.n_layers = i32(h + 8), r.n_heads = i32(h + 12), r.n_kv_heads = i32(h + 16);
  r.vocab = i32(h + 20), r.seq_len = i32(h + 24);
  if (v1) {
    r.shared = data[36] == 1;
    off = 256;
  } else {
    r.shared = r.vocab > 0;
    r.vocab = std::abs(r.vocab);
    off = 28;
  }
  const std::size_t d = r.dim, hd = r.hidden, L = r.n_layers, kv = r.kv_dim(), V = r.vocab, S = r.seq_len;
  auto take = [&](std::vector<float>& w, std::size_t n) {
    BOOST_TEST_REQUIRE(off + 4 * n <= data.size());
    w.resize(n);
    std::memcpy(w.data(), data.data() + off, 4 * n);
    off += 4 * n;
  };
  std::vector<float> skip;
  if (v1) {
    take(r.rms_att, L * d), take(r.rms_ffn, L * d), take(r.rms_final, d), take(r.emb, V * d);
    take(r.wq, L * d * d), take(r.wk, L * kv * d), take(r.wv, L * kv * d), take(r.wo, L * d * d);
    take(r.w1, L * hd * d), take(r.w2, L * d * hd), take(r.w3, L * hd * d);
  } else {
    take(r.emb, V * d), take(r.rms_att, L * d), take(r.wq, L * d * d), take(r.wk, L * kv * d), take(r.wv, L * kv * d);
    take(r.wo, L * d * d), take(r.rms_ffn, L * d), take(r.w1, L * hd * d), take(r.w2, L * d * hd), take(r.w3, L * hd * d);
    take(r.rms_final, d), take(skip, S * (r.head_size() / 2) * 2);  // freq_cis_real, freq_cis_imag (recomputed)
  }
  if (r.shared) r.wcls = r.emb;
  else take(r.wcls, V * d);
  return r;
}

using Vec = std::vector<double>;

Vec matvec(const std::vector<float>& w, std::size_t at, const Vec& x, std::size_t rows) {
  Vec out(rows, 0.0);
  for (std::size_t i = 0; i < rows; ++i) {
    double s = 0;
    for (std::size_t j = 0; j < x.size(); ++j) s += static_cast<double>(w[at + i * x.size() + j]) * x[j];
    out[i] = s;
  }
  return out;
}

Vec rmsnorm(const Vec& x, const std::vector<float>& g, std::size_t at) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double k = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + 1e-5);
  Vec out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = x[i] * k * g[at + i];
  return out;
}

// (2i, 2i+1) of each head rotated by pos / 10000^(2i/head_size)
void rope(Vec& v, int pos, int head_size) {
  for (std::size_t i = 0; i < v.size(); i += 2) {
    const double f = 1.0 / std::pow(10000.0, static_cast<double>(i % head_size) / head_size);
    const double a = pos * f, c = std::cos(a), s = std::sin(a);
    const double x0 = v[i], x1 = v[i + 1];
    v[i] = x0 * c - x1 * s;
    v[i + 1] = x0 * s + x1 * c;
  }
}

// softmax(Wcls · rmsnorm_final(x))
Vec lens_probs(const Ref& r, const Vec& x) {
  const Vec logits = matvec(r.wcls, 0, rmsnorm(x, r.rms_final, 0), r.vocab);
  const double m = *std::max_element(logits.begin(), logits.end());
  Vec p(logits.size());
  double sum = 0;
  for (std::size_t i = 0; i < p.size(); ++i) sum += p[i] = std::exp(logits[i] - m);
  for (auto& v : p) v /= sum;
  return p;
}

// Feeds `tokens` from position 0; for each position, the lens distributions after each block's attention
// (attn[l]) and after each block (block[l]).
struct Points {
  std::vector<Vec> attn, block;
};
std::vector<Points> reference_lens(const Ref& r, const std::vector<int>& tokens) {
  const std::size_t d = r.dim, hd = r.hidden, kv = r.kv_dim(), hs = r.head_size();
  const int kv_mul = r.n_heads / r.n_kv_heads;
  std::vector<std::vector<Vec>> kc(r.n_layers), vc(r.n_layers);
  std::vector<Points> out;
  for (std::size_t pos = 0; pos < tokens.size(); ++pos) {
    Vec x(d);
    for (std::size_t i = 0; i < d; ++i) x[i] = r.emb[static_cast<std::size_t>(tokens[pos]) * d + i];
    Points pts;
    for (int l = 0; l < r.n_layers; ++l) {
      const std::size_t L = l;
      Vec xb = rmsnorm(x, r.rms_att, L * d);
      Vec q = matvec(r.wq, L * d * d, xb, d), k = matvec(r.wk, L * kv * d, xb, kv), v = matvec(r.wv, L * kv * d, xb, kv);
      rope(q, static_cast<int>(pos), static_cast<int>(hs));
      rope(k, static_cast<int>(pos), static_cast<int>(hs));
      kc[l].push_back(k);
      vc[l].push_back(v);
      Vec att(d, 0.0);
      for (int h = 0; h < r.n_heads; ++h) {
        const std::size_t qh = h * hs, kh = (h / kv_mul) * hs;
        Vec s(pos + 1);
        for (std::size_t t = 0; t <= pos; ++t) {
          double dot = 0;
          for (std::size_t i = 0; i < hs; ++i) dot += q[qh + i] * kc[l][t][kh + i];
          s[t] = dot / std::sqrt(static_cast<double>(hs));
        }
        const double m = *std::max_element(s.begin(), s.end());
        double sum = 0;
        for (auto& e : s) sum += e = std::exp(e - m);
        for (std::size_t t = 0; t <= pos; ++t)
          for (std::size_t i = 0; i < hs; ++i) att[qh + i] += s[t] / sum * vc[l][t][kh + i];
      }
      const Vec o = matvec(r.wo, L * d * d, att, d);
      for (std::size_t i = 0; i < d; ++i) x[i] += o[i];
      pts.attn.push_back(lens_probs(r, x));
      xb = rmsnorm(x, r.rms_ffn, L * d);
      const Vec h1 = matvec(r.w1, L * hd * d, xb, hd), h3 = matvec(r.w3, L * hd * d, xb, hd);
      Vec g(hd);
      for (std::size_t i = 0; i < hd; ++i) g[i] = h1[i] / (1.0 + std::exp(-h1[i])) * h3[i];
      const Vec f = matvec(r.w2, L * d * hd, g, d);
      for (std::size_t i = 0; i < d; ++i) x[i] += f[i];
      pts.block.push_back(lens_probs(r, x));
    }
    out.push_back(std::move(pts));
  }
  return out;
}

// A lens point's top list against the reference distribution p: every listed probability within `tol` of
// p's, listed in order, and no unlisted token more likely than a listed one by more than `tol` (so the ids
// are p's top ids, up to ties closer than the tolerance).
void check_top(const json& top, const Vec& p, std::size_t k, double tol, const std::string& where) {
  BOOST_TEST_CONTEXT(where) {
    BOOST_TEST_REQUIRE(top.size() == k);
    std::vector<bool> listed(p.size(), false);
    double lowest = 1;
    for (const auto& t : top) {
      const int id = t["id"];
      listed[id] = true;
      BOOST_TEST(std::fabs(t["prob"].get<double>() - p[id]) <= tol, "token " << id << ": lens " << t["prob"] << ", float64 " << p[id]);
      lowest = std::min(lowest, p[id]);
    }
    for (std::size_t i = 0; i < p.size(); ++i)
      if (!listed[i]) BOOST_TEST(p[i] <= lowest + tol, "unlisted token " << i << " has p " << p[i] << " above a listed " << lowest);
  }
}

struct Case {
  std::string name;
  std::vector<std::string> model_args;  // empty: the embedded toy model
  fs::path checkpoint;
  std::string prompt;
};
std::ostream& operator<<(std::ostream& o, const Case& c) { return o << c.name; }

std::vector<Case> cases() {
  std::vector<Case> v{{"toy", {}, fs::path(GLASSBOX_SOURCE_DIR) / "models/toy/toy.bin", "The weather today is"}};
  if (gbtest::shared_dir()) v.push_back({"stories260K", gbtest::stories_args(), gbtest::shared("models/stories260K.bin"), "Once upon a time"});
  return v;
}

}  // namespace

BOOST_DATA_TEST_CASE(the_lens_equals_a_float64_forward_pass_at_every_step_and_block, bdata::make(cases()), c) {
  const fs::path dir = gbtest::temp_dir("lens-" + c.name);
  const fs::path trace = dir / "lens.jsonl";
  std::vector<std::string> args = {"run", "--prompt", c.prompt, "--sampler", "greedy", "--max-tokens", "6", "--trace",
                                   trace.string(), "--trace-lens", "all", "--trace-top", "5"};
  args.insert(args.end(), c.model_args.begin(), c.model_args.end());
  const auto r = run_cli(args);
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  const auto lines = gbtest::read_jsonl(trace);
  const json& header = lines.front();
  const Ref ref = read_llama2c(c.checkpoint);
  BOOST_TEST_REQUIRE(header["model"]["config"]["n_layers"].get<int>() == ref.n_layers);

  std::vector<int> tokens = header["prompt_ids"].get<std::vector<int>>();
  std::vector<json> steps;
  for (const auto& l : lines)
    if (l["type"] == "step") steps.push_back(l);
  BOOST_TEST_REQUIRE(steps.size() >= 2u);
  for (std::size_t s = 0; s + 1 < steps.size(); ++s) tokens.push_back(steps[s]["token"]["id"]);
  const auto want = reference_lens(ref, tokens);

  for (const auto& st : steps) {
    const int pos = st["pos"];
    const json& lens = st["lens"];
    BOOST_TEST_REQUIRE(lens.size() == 2u * ref.n_layers);
    for (int l = 0; l < ref.n_layers; ++l) {
      const json& in = lens[2 * l];
      const json& after = lens[2 * l + 1];
      BOOST_TEST(in["layer"] == l + 1);
      BOOST_TEST(in["point"] == "attn");
      BOOST_TEST(after["layer"] == l + 1);
      BOOST_TEST(!after.contains("point"));
      const std::string where = c.name + " step " + std::to_string(st["step"].get<int>()) + " layer " + std::to_string(l + 1);
      check_top(in["top"], want[pos].attn[l], 5, 1e-4, where + " (after attention)");
      check_top(after["top"], want[pos].block[l], 5, 1e-4, where);
    }
    // The last block's point is the step's own distribution: the same numbers, written the same way.
    const json& last = lens.back()["top"];
    BOOST_TEST_REQUIRE(last.size() == st["top"].size());
    for (std::size_t i = 0; i < last.size(); ++i) {
      BOOST_TEST(last[i]["id"] == st["top"][i]["id"]);
      BOOST_TEST(last[i]["prob"] == st["top"][i]["prob"]);
      BOOST_TEST(last[i]["logit"] == st["top"][i]["logit"]);
    }
    BOOST_TEST(lens.back()["entropy"] == st["entropy"]);
  }
  // The trace validates (layers within the model's, tops sorted) and reads back.
  const auto v = run_cli({"trace", "validate", trace.string()});
  BOOST_TEST(v.rc == 0, v.out + v.err);
}

// Without --trace-lens nothing changes: no "lens" key; "blocks" gives one point per block.
BOOST_AUTO_TEST_CASE(lens_points_are_what_was_asked_for) {
  const fs::path dir = gbtest::temp_dir("lens-points");
  auto steps_of = [&](const std::vector<std::string>& extra) {
    const fs::path t = dir / "t.jsonl";
    std::vector<std::string> a = {"run", "--prompt", "The weather today is", "--sampler", "greedy", "--max-tokens", "2", "--trace", t.string()};
    a.insert(a.end(), extra.begin(), extra.end());
    const auto r = run_cli(a);
    BOOST_TEST_REQUIRE(r.rc == 0, r.err);
    std::vector<json> s;
    for (const auto& l : gbtest::read_jsonl(t))
      if (l["type"] == "step") s.push_back(l);
    return s;
  };
  for (const auto& s : steps_of({})) BOOST_TEST(!s.contains("lens"));
  const auto blocks = steps_of({"--trace-lens"});
  const int n_layers = 4;  // the toy model's
  for (const auto& s : blocks) {
    BOOST_TEST_REQUIRE(s["lens"].size() == static_cast<std::size_t>(n_layers), s["lens"].dump());
    for (int l = 0; l < n_layers; ++l) {
      BOOST_TEST(s["lens"][l]["layer"] == l + 1);
      BOOST_TEST(s["lens"][l]["top"].size() == 10u);  // the run's --trace-top
    }
  }
  const auto r = run_cli({"run", "--prompt", "x", "--trace-lens", "middle"});
  BOOST_TEST(r.rc == 2);
  BOOST_TEST(r.err.find("trace-lens 'middle'") != std::string::npos, r.err);
}

// `trace diff` compares the lens point by point and names the layer where two runs part; `trace lens`
// prints the grid (a row per step, a column per point).
BOOST_AUTO_TEST_CASE(diff_names_the_lens_layer_and_trace_lens_prints_the_grid) {
  const fs::path dir = gbtest::temp_dir("lens-diff");
  const fs::path golden = dir / "golden.jsonl", changed = dir / "changed.jsonl";
  const auto r = run_cli({"run", "--prompt", "The weather today is", "--sampler", "greedy", "--max-tokens", "3", "--trace",
                          golden.string(), "--trace-lens", "all", "--trace-top", "4"});
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  const auto same = run_cli({"trace", "diff", golden.string(), golden.string()});
  BOOST_TEST(same.rc == 0, same.out + same.err);

  // Layer 2's after-block point at step 1: its top token's probability moved by 0.2.
  std::string out;
  for (auto line : gbtest::read_jsonl(golden)) {
    if (line["type"] == "step" && line["step"] == 1) {
      for (auto& p : line["lens"])
        if (p["layer"] == 2 && !p.contains("point")) p["top"][0]["prob"] = p["top"][0]["prob"].get<double>() * 0.8;
    }
    out += line.dump() + "\n";
  }
  gbtest::write_file(changed, out);
  const auto d = run_cli({"trace", "diff", golden.string(), changed.string()});
  BOOST_TEST(d.rc == 1, d.out + d.err);
  BOOST_TEST(d.out.find("step 1: lens after layer 2: |Δlogprob|") != std::string::npos, d.out);
  BOOST_TEST(d.out.find("lens |Δlogprob| by layer:") != std::string::npos, d.out);
  BOOST_TEST(d.out.find("lens after layer 1") == std::string::npos, d.out);

  const auto g = run_cli({"trace", "lens", golden.string()});
  BOOST_TEST_REQUIRE(g.rc == 0, g.err);
  BOOST_TEST(g.out.find("L1 attn") != std::string::npos, g.out);
  BOOST_TEST(g.out.find("L4 ") != std::string::npos, g.out);
  const auto steps = gbtest::read_jsonl(golden);
  std::size_t rows = 0;
  for (std::size_t i = 0; i < g.out.size(); ++i) rows += g.out[i] == '\n';
  BOOST_TEST(rows == 1 + (steps.size() - 2) + 3);  // title, a row per step, the three-line legend
  // The last column: where the answer settles, the first layer from which the top token after every block is
  // the last block's, worked out here from the trace's own lens.
  BOOST_TEST(g.out.find("settles") != std::string::npos, g.out);
  std::istringstream table(g.out);
  std::string row;
  std::getline(table, row);  // the title
  for (const auto& line : steps) {
    if (line["type"] != "step") continue;
    int answer = -1, at = -1;
    for (auto it = line["lens"].rbegin(); it != line["lens"].rend(); ++it) {
      if (it->contains("point")) continue;
      const int id = (*it)["top"][0]["id"];
      if (answer < 0) answer = id;
      if (id != answer) break;
      at = (*it)["layer"];
    }
    BOOST_TEST_REQUIRE(static_cast<bool>(std::getline(table, row)));
    const std::string want = "L" + std::to_string(at);
    BOOST_TEST(row.size() >= want.size());
    BOOST_TEST(row.substr(row.size() - want.size()) == want, "step " << line["step"] << ": " << row);
    BOOST_TEST(row.substr(row.size() - want.size() - 1, 1) == " ", row);
  }
  const auto none = run_cli({"trace", "lens", (dir / "none.jsonl").string()});
  BOOST_TEST(none.rc == 2);
}

// Every GGUF weight type and architecture of ../shared: a lens run works, validates, and its last point is
// the step's distribution (the output head on the last residual row — with Gemma 2's soft-cap too).
std::vector<std::string> gguf_files() {
  std::vector<std::string> v;
  if (!gbtest::shared_dir()) return {"(none: ../shared absent)"};
  for (const char* sub : {"gguf", "gguf/arch"})
    for (const auto& e : fs::directory_iterator(gbtest::shared(sub)))
      if (e.path().extension() == ".gguf") v.push_back(fs::relative(e.path(), *gbtest::shared_dir()).string());
  std::sort(v.begin(), v.end());
  return v;
}

BOOST_DATA_TEST_CASE(a_lens_runs_on_every_weight_type_and_architecture, bdata::make(gguf_files()), rel) {
  if (!gbtest::shared_dir()) {
    BOOST_TEST_MESSAGE("skipped: needs ../shared (or GLASSBOX_TEST_DATA), which is absent");
    return;
  }
  const fs::path dir = gbtest::temp_dir("lens-gguf");
  const fs::path trace = dir / "t.jsonl";
  const auto r = run_cli({"run", "--model", gbtest::shared(rel).string(), "--prompt", "Once upon a time", "--sampler", "greedy",
                          "--max-tokens", "2", "--trace", trace.string(), "--trace-lens", "all", "--trace-top", "3"});
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  const auto lines = gbtest::read_jsonl(trace);
  const int n_layers = lines.front()["model"]["config"]["n_layers"];
  for (const auto& l : lines) {
    if (l["type"] != "step") continue;
    BOOST_TEST_REQUIRE(l["lens"].size() == 2u * n_layers);
    const json& last = l["lens"].back();
    BOOST_TEST(last["layer"] == n_layers);
    BOOST_TEST(last["top"] == l["top"]);
    BOOST_TEST(last["entropy"] == l["entropy"]);
  }
  const auto v = run_cli({"trace", "validate", trace.string()});
  BOOST_TEST(v.rc == 0, v.out + v.err);
}

// chat and compare record the lens too (into each turn's / each run's trace).
BOOST_AUTO_TEST_CASE(chat_and_compare_record_the_lens) {
  const fs::path dir = gbtest::temp_dir("lens-chat-compare");
  const auto c = run_cli({"compare", "-p", "The weather today is", "-s", "greedy", "-N", "1", "-n", "2", "--traces",
                          (dir / "runs").string(), "--trace-lens", "--no-progress"});
  BOOST_TEST_REQUIRE(c.rc == 0, c.err);
  int traced = 0;
  for (const auto& e : fs::directory_iterator(dir / "runs")) {
    if (e.path().extension() != ".jsonl") continue;
    for (const auto& l : gbtest::read_jsonl(e.path()))
      if (l["type"] == "step") {
        BOOST_TEST(l["lens"].size() == 4u);
        ++traced;
      }
  }
  BOOST_TEST(traced > 0);
  const auto bad = run_cli({"compare", "-p", "x", "-s", "greedy", "-N", "1", "-n", "1", "--trace-lens"});
  BOOST_TEST(bad.rc == 2);
  BOOST_TEST(bad.err.find("--traces") != std::string::npos, bad.err);

  const fs::path chat_trace = dir / "chat.jsonl", input = dir / "turns.txt";
  gbtest::write_file(input, "My name is Zoe.\nWhat is my name?\n");
  const auto ch = run_cli({"chat", "-n", "3", "--input", input.string(), "--trace", chat_trace.string(), "--trace-lens", "all"});
  BOOST_TEST_REQUIRE(ch.rc == 0, ch.err);
  for (const char* turn : {"chat-turn1.jsonl", "chat-turn2.jsonl"}) {
    int steps = 0;
    for (const auto& l : gbtest::read_jsonl(dir / turn))
      if (l["type"] == "step") {
        BOOST_TEST(l["lens"].size() == 8u);
        ++steps;
      }
    BOOST_TEST(steps > 0, turn);
  }
}
