// glassbox-bench-sampling: nanoseconds per sampling step (logits in, token out) for a few sampler
// chains over vocabularies of 512, 32,000 and 128,000 entries, with random logits from a fixed seed.
//
//   glassbox-bench-sampling [--sigma S] [--seconds T] [--record] [--chain C]...
//
// Logits are N(0, S^2) (default S = 3, a spread like a language model's), 8 different vectors
// cycled. Each chain runs for about T seconds (default 0.3) per vocabulary after a warm-up, in
// batches of 8 steps; the figure is the median batch's time per step (robust to a busy machine).
// "kept" is the mean number of candidates left when the selecting stage ran. The last row times
// a plain std::sort of the candidates: the cost the partial selections avoid.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "glassbox/pipeline.hpp"
#include "glassbox/registry.hpp"
#include "glassbox/sampling.hpp"

using namespace glassbox;
using Clock = std::chrono::steady_clock;

namespace {

struct Result {
  double ns = 0, kept = 0;
};

std::vector<std::vector<float>> make_logits(std::size_t n, double sigma) {
  std::mt19937_64 g(1234);
  std::normal_distribution<float> d(0.0f, static_cast<float>(sigma));
  std::vector<std::vector<float>> out(8, std::vector<float>(n));
  for (auto& v : out)
    for (auto& x : v) x = d(g);
  return out;
}

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

Result bench_chain(const Registry& reg, const std::string& chain_text, const std::vector<std::vector<float>>& logits,
                   double seconds, bool record) {
  std::vector<std::string> warnings;
  const int n = static_cast<int>(logits[0].size());
  SamplerChain chain(build_sampler_stages(reg, parse_plugin_chain(chain_text, "sampler"), warnings), n, 42);
  for (int i = 0; i < 64; ++i) chain.accept(i * 7 % n);  // some history for the penalties
  volatile std::int32_t sink = 0;
  StageRecorder recorder(chain, n, 10);
  StageObserver* observer = record ? &recorder : nullptr;
  for (int i = 0; i < 5; ++i) sink = chain.sample(logits[i % logits.size()], observer).id;  // warm-up
  double kept = 0;
  std::vector<double> batches;  // ns per step of each batch of 8
  const auto t0 = Clock::now();
  long steps = 0;
  while (std::chrono::duration<double>(Clock::now() - t0).count() < seconds || batches.size() < 5) {
    const auto b0 = Clock::now();
    for (int i = 0; i < 8; ++i, ++steps) sink = chain.sample(logits[steps % logits.size()], observer).id;
    batches.push_back(std::chrono::duration<double, std::nano>(Clock::now() - b0).count() / 8);
  }
  (void)sink;
  // kept: one recorded step per logit vector (outside the timing)
  StageRecorder one(chain, n, 1);
  for (const auto& l : logits) {
    chain.sample(l, &one);
    const auto r = one.records();
    kept += r.empty() ? 0 : r.back().kept;
  }
  return {median(batches), kept / logits.size()};
}

Result bench_sort(const std::vector<std::vector<float>>& logits, double seconds) {
  Candidates c;
  c.data.reserve(logits[0].size());
  std::vector<double> batches;
  long steps = 0;
  const auto t0 = Clock::now();
  while (std::chrono::duration<double>(Clock::now() - t0).count() < seconds || batches.size() < 5) {
    const auto b0 = Clock::now();
    for (int i = 0; i < 8; ++i, ++steps) {
      const auto& l = logits[steps % logits.size()];
      c.data.resize(l.size());
      for (std::size_t j = 0; j < l.size(); ++j) c.data[j] = {static_cast<std::int32_t>(j), l[j], 0};
      c.sorted = false;
      c.softmax();  // full sort + softmax
    }
    batches.push_back(std::chrono::duration<double, std::nano>(Clock::now() - b0).count() / 8);
  }
  return {median(batches), static_cast<double>(logits[0].size())};
}

std::string human(double ns) {
  char b[32];
  if (ns < 1e4) std::snprintf(b, sizeof b, "%.0f ns", ns);
  else if (ns < 1e7) std::snprintf(b, sizeof b, "%.1f us", ns / 1e3);
  else std::snprintf(b, sizeof b, "%.1f ms", ns / 1e6);
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  double sigma = 3.0, seconds = 0.3;
  bool record = false;
  std::vector<std::string> chains;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--sigma" && i + 1 < argc) sigma = std::stod(argv[++i]);
    else if (a == "--seconds" && i + 1 < argc) seconds = std::stod(argv[++i]);
    else if (a == "--record") record = true;
    else if (a == "--chain" && i + 1 < argc) chains.push_back(argv[++i]);
    else {
      std::fprintf(stderr, "usage: %s [--sigma S] [--seconds T] [--record] [--chain CHAIN]...\n", argv[0]);
      return 2;
    }
  }
  if (chains.empty())
    chains = {"greedy",
              "dist",
              "top-k:40,temperature:0.8",
              "top-p:0.9,temperature:0.8",
              "min-p:0.05,temperature:0.8",
              "default",
              "repetition-penalty:1.1,top-k:40,top-p:0.9,temperature:0.8",
              "typical-p:0.9",
              "top-n-sigma:1",
              "mirostat-v2:5"};
  Registry reg;
  reg.load_default();
  const std::vector<std::size_t> sizes{512, 32000, 128000};
  std::vector<std::vector<std::vector<float>>> logits;
  for (auto n : sizes) logits.push_back(make_logits(n, sigma));

  std::printf("sampling step: logits in, token out (ns/step; logits N(0, %.3g^2), %s)\n", sigma,
              record ? "recording every stage, as with --trace" : "no stage recording, as without --trace");
  std::printf("%-58s %14s %14s %14s   kept (512/32k/128k)\n", "chain", "V=512", "V=32000", "V=128000");
  auto row = [&](const std::string& name, const std::vector<Result>& r) {
    std::printf("%-58s", name.c_str());
    for (const auto& x : r) std::printf(" %14s", human(x.ns).c_str());
    std::printf("   %.0f/%.0f/%.0f\n", r[0].kept, r[1].kept, r[2].kept);
    std::fflush(stdout);
  };
  for (const auto& c : chains) {
    std::vector<Result> r;
    for (const auto& l : logits) r.push_back(bench_chain(reg, c, l, seconds, record));
    row(c, r);
  }
  std::vector<Result> r;
  for (const auto& l : logits) r.push_back(bench_sort(l, seconds));
  row("(reference: full sort + softmax of every candidate)", r);
  return 0;
}
