// `glassbox bench`: prefill and decode throughput in the manner of llama-bench (lists of prompt and
// generation lengths and thread counts, repeated runs, median and spread), set against this
// machine's roofline: memory bandwidth for decode, FMA throughput for prefill.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <cstdint>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <memory>
#include <thread>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "glassbox/error.hpp"
#include "glassbox/kernels.hpp"
#include "glassbox/os.hpp"
#include "glassbox/thread_group.hpp"
#include "session.hpp"

namespace glassbox::cli {

namespace {

// One measured test (pp/tg at a thread count): medians over the repeats. bench's JSON "results" entry.
struct BenchRow {
  std::string test;
  int threads = 0, tokens = 0;
  int batch = 1;  // decode tests: sequences decoded together (tok_s counts all of their tokens)
  double tok_s = 0, tok_s_sd = 0, ms_per_token = 0, cpu_ms_per_token = 0;
  std::optional<double> ttft_ms;            // prefill tests
  std::optional<double> roofline_fraction;  // unless --no-roofline
  std::optional<double> read_fraction;      // decode tests, unless --no-roofline: of the read-only bandwidth
  std::optional<int> eog_tokens;            // decode tests with a vocabulary: end-of-generation tokens decoded
};

nlohmann::json to_json(const BenchRow& e) {
  nlohmann::json j = {{"test", e.test},         {"threads", e.threads},
                      {"tokens", e.tokens},      {"tok_s", e.tok_s},
                      {"tok_s_sd", e.tok_s_sd},  {"ms_per_token", e.ms_per_token},
                      {"cpu_ms_per_token", e.cpu_ms_per_token}};
  if (e.batch > 1) j["batch"] = e.batch;
  if (e.ttft_ms) j["ttft_ms"] = *e.ttft_ms;
  if (e.roofline_fraction) j["roofline_fraction"] = *e.roofline_fraction;
  if (e.read_fraction) j["read_roofline_fraction"] = *e.read_fraction;
  if (e.eog_tokens) j["eog_tokens"] = *e.eog_tokens;
  return j;
}

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
// CPU time of the whole process (all threads): on a shared machine, wall time includes the time
// other processes held the cores; CPU time per token does not.
double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}
double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
double stddev(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  double m = 0, s = 0;
  for (double x : v) m += x;
  m /= static_cast<double>(v.size());
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size() - 1));
}
double peak_rss_mib() { return static_cast<double>(os::peak_resident_bytes()) / (1024.0 * 1024.0); }

// Runs fn(t) on `threads` threads at once and returns the longest CPU time any of them used. CPU
// time, not wall time: on a shared machine a thread's wall time includes the time it waited for a
// core, and the roofline should say what the cores do while they run.
template <class F>
double timed_on_threads(int threads, F fn) {
  std::vector<double> cpu(threads);
  auto run = [&](int t) {
    timespec a{}, b{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
    fn(t);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
    cpu[t] = static_cast<double>(b.tv_sec - a.tv_sec) + 1e-9 * static_cast<double>(b.tv_nsec - a.tv_nsec);
  };
  {
    ThreadGroup pool("--threads " + std::to_string(threads));
    for (int t = 1; t < threads; ++t) pool.start(run, t);
    run(0);
  }  // (joined here)
  return *std::max_element(cpu.begin(), cpu.end());
}

// STREAM's triad a = b + s·c over arrays far larger than the caches (3 × 128 MiB), split across
// `threads`; bytes counted as STREAM counts them (3 arrays per pass). Best of 5 passes.
double triad_bytes_per_s(int threads) {
  const std::size_t n = std::size_t{32} << 20;
  std::vector<float> a(n), b(n, 1.0f), c(n, 2.0f);
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const double s = timed_on_threads(threads, [&](int t) {
      const std::size_t i0 = n * t / threads, i1 = n * (t + 1) / threads;
      for (std::size_t i = i0; i < i1; ++i) a[i] = b[i] + 3.0f * c[i];
    });
    best = std::max(best, 3.0 * sizeof(float) * static_cast<double>(n) / s);
  }
  if (a[n / 2] != 7.0f) throw Error("bench: triad check failed");
  return best;
}

// A read-only stream over one array as large (384 MiB), split across `threads`: what decode does to
// its weights. It can exceed the triad, which also writes (and on many machines one core's reads
// outrun it): so "100% of the triad" is not the limit it looks like. 64-bit words XORed into four
// accumulators (the compiler vectorizes integer XOR), so the loop waits on memory, not on adds.
// Best of 5 passes.
double read_bytes_per_s(int threads) {
  const std::size_t n = std::size_t{48} << 20;  // a multiple of 4: XOR of 0 .. n-1 is 0
  std::vector<std::uint64_t> a(n);
  for (std::size_t i = 0; i < n; ++i) a[i] = i;
  double best = 0;
  std::vector<std::uint64_t> part(static_cast<std::size_t>(threads));
  for (int rep = 0; rep < 5; ++rep) {
    const double s = timed_on_threads(threads, [&](int t) {
      const std::size_t i0 = n * t / threads / 4 * 4, i1 = t + 1 == threads ? n : n * (t + 1) / threads / 4 * 4;
      std::uint64_t x0 = 0, x1 = 0, x2 = 0, x3 = 0;
      for (std::size_t i = i0; i < i1; i += 4) {
        x0 ^= a[i];
        x1 ^= a[i + 1];
        x2 ^= a[i + 2];
        x3 ^= a[i + 3];
      }
      part[static_cast<std::size_t>(t)] = x0 ^ x1 ^ x2 ^ x3;
    });
    std::uint64_t all = 0;
    for (auto x : part) all ^= x;
    if (all != 0) throw Error("bench: read-bandwidth check failed");
    best = std::max(best, sizeof(std::uint64_t) * static_cast<double>(n) / s);
  }
  return best;
}

// FMA throughput of the kernel set in use, on `threads` threads: best of 5.
double fma_flops_per_s(int threads) {
  const std::size_t iters = 20'000'000;
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    std::vector<double> flops(threads);
    const double s = timed_on_threads(threads, [&](int t) { flops[t] = kernels::fma_probe(iters); });
    double total = 0;
    for (double f : flops) total += f;
    best = std::max(best, total / s);
  }
  return best;
}

// Comma-separated positive integers: "128,256".
std::vector<int> int_list(const std::string& text, const char* opt) {
  std::vector<int> out;
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, comma - at);
    std::size_t used = 0;
    int v = 0;
    try {
      v = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || v < 1)
      throw ConfigError(std::string(opt) + ": '" + item + "' is not a positive integer (expected a list like 64,128)");
    out.push_back(v);
    at = comma + 1;
  }
  return out;
}

struct Result {
  std::string test;  // "pp128", "tg128", "pp128-1by1", "tg128x8"
  int tokens = 0, threads = 0;
  std::vector<double> tok_s, cpu_ms_per_tok, ttft_ms;
  std::optional<int> eog_tokens;
  int batch = 1;
};

struct BenchOpts {
  std::string prompts = "128", gens = "128", threads, batches = "1";
  int repeat = 5;
  bool json = false, csv = false, one_by_one = false, no_roofline = false;
};

// What the tests run on: the session, a fixed prompt, the wider and one-position models, a store per
// batched sequence, and the decode tests' greedy pick.
struct Bench {
  Session& s;
  const RunOptions& opt;
  const BenchOpts& o;
  std::vector<std::int32_t> prompt;  // BOS then ids spread over the vocabulary
  int block = 0;                     // the session model's prefill block
  std::unique_ptr<Transformer> batched, single;
  std::vector<std::unique_ptr<KvStore>> stores;  // (widest batch) one per batched sequence
  std::vector<std::int32_t> eog;

  // A fixed, reproducible prompt: BOS (where the vocabulary adds one, as llama-bench does) then ids
  // spread over the vocabulary. Without a vocabulary (a llama2.c checkpoint and no --tokenizer), BOS
  // is llama2.c's id 1. Batched decode: a Transformer as wide as the widest batch, and a store per sequence.
  Bench(Session& session, const RunOptions& options, const BenchOpts& bo, int longest, int widest) : s(session), opt(options), o(bo) {
    const Config& c = s.config;
    const bool bos = !s.tokenizer || (s.tokenizer->add_bos() && s.tokenizer->bos_id() >= 0);
    prompt.push_back(bos ? (s.tokenizer ? s.tokenizer->bos_id() : 1) : 3 % c.vocab_size);
    for (int i = 1; i < longest; ++i) prompt.push_back(3 + (i * 7919) % (c.vocab_size - 3));
    block = s.model->max_block();
    if (widest > 1) {
      batched = std::make_unique<Transformer>(s.config, s.source->weights(), widest);
      for (int i = 0; i < widest; ++i) stores.push_back(s.registry->make_attention(opt.attention, c.attention_shape()));
    }
    if (o.one_by_one) single = std::make_unique<Transformer>(s.config, s.source->weights(), 1);
    if (s.tokenizer) eog = s.tokenizer->eog_ids();
  }

  std::span<const float> prefill(Transformer& m, int p, int step) {
    std::span<const float> logits;
    for (int at = 0; at < p; at += step) {
      const int n = std::min(step, p - at);
      logits = m.forward(std::span(prompt).subspan(at, n), at, *s.attention);
    }
    return logits;
  }

  // The decode test's greedy pick: as llama-bench it never stops, so it runs past an end-of-generation
  // token where a run would have ended; --ignore-eos keeps those ids out of the pick, as `run --ignore-eos`.
  bool is_eog(std::int32_t t) const { return std::find(eog.begin(), eog.end(), t) != eog.end(); }
  std::int32_t pick(std::span<const float> logits) const {
    auto next = static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    if (opt.ignore_eos && is_eog(next)) {
      float best = -std::numeric_limits<float>::infinity();
      for (std::size_t v = 0; v < logits.size(); ++v)
        if (!is_eog(static_cast<std::int32_t>(v)) && (logits[v] > best || next < 0 || is_eog(next))) best = logits[v], next = static_cast<std::int32_t>(v);
    }
    return next;
  }

  // ppP (and ppP-1by1 with --one-by-one) at `th` threads.
  void prefill_tests(int th, int p, std::vector<Result>& out) {
    Result r{"pp" + std::to_string(p), p, th, {}, {}, {}, std::nullopt};
    for (int rep = 0; rep < o.repeat; ++rep) {
      s.attention->clear();
      const double c0 = cpu_seconds();
      const auto t0 = Clock::now();
      prefill(*s.model, p, block);
      const double sec = seconds_since(t0);
      r.tok_s.push_back(p / sec);
      r.ttft_ms.push_back(1000 * sec);  // the prompt's forward passes end with the first token's logits
      r.cpu_ms_per_tok.push_back(1000 * (cpu_seconds() - c0) / p);
    }
    out.push_back(std::move(r));
    if (!single) return;
    Result q{"pp" + std::to_string(p) + "-1by1", p, th, {}, {}, {}, std::nullopt};
    for (int rep = 0; rep < o.repeat; ++rep) {
      s.attention->clear();
      const double c0 = cpu_seconds();
      const auto t0 = Clock::now();
      prefill(*single, p, 1);
      q.tok_s.push_back(p / seconds_since(t0));
      q.cpu_ms_per_tok.push_back(1000 * (cpu_seconds() - c0) / p);
    }
    out.push_back(std::move(q));
  }

  // tgG at `th` threads: as llama-bench's tg test, from an empty context (BOS), greedy, G single-token steps.
  void decode_test(int th, int g, std::vector<Result>& out) {
    Result r{"tg" + std::to_string(g), g, th, {}, {}, {}, std::nullopt};
    for (int rep = 0; rep < o.repeat; ++rep) {
      s.attention->clear();
      std::span<const float> logits = prefill(*s.model, 1, 1);
      int eog_seen = 0;
      const double c0 = cpu_seconds();
      const auto t0 = Clock::now();
      for (int i = 0; i < g; ++i) {
        const std::int32_t next = pick(logits);
        eog_seen += is_eog(next);
        logits = s.model->forward(std::span(&next, 1), i + 1, *s.attention);
      }
      r.tok_s.push_back(g / seconds_since(t0));
      r.cpu_ms_per_tok.push_back(1000 * (cpu_seconds() - c0) / g);
      if (s.tokenizer) r.eog_tokens = eog_seen;  // the same in every repeat: greedy from the same start
    }
    out.push_back(std::move(r));
  }

  // tgGxB: B sequences from BOS, each fed a different first token, then G steps of one batched pass each.
  void batched_test(int th, int g, int B, std::vector<Result>& out) {
    const Config& c = s.config;
    Result q{"tg" + std::to_string(g) + "x" + std::to_string(B), g, th, {}, {}, {}, std::nullopt, B};
    std::vector<BatchRow> rows(static_cast<std::size_t>(B));
    for (int rep = 0; rep < o.repeat; ++rep) {
      for (int b = 0; b < B; ++b) {
        stores[b]->clear();
        rows[b] = {prompt[0], 0, stores[b].get()};
      }
      std::span<const float> logits = batched->forward_batch(rows);
      for (int b = 0; b < B; ++b) rows[b] = {3 + (b * 7919) % (c.vocab_size - 3), 1, stores[b].get()};
      const double c0 = cpu_seconds();
      const auto t0 = Clock::now();
      for (int i = 0; i < g; ++i) {
        logits = batched->forward_batch(rows);
        for (int b = 0; b < B; ++b) {
          rows[b].token = pick(logits.subspan(static_cast<std::size_t>(b) * c.vocab_size, c.vocab_size));
          rows[b].pos = i + 2;
        }
      }
      const double sec = seconds_since(t0);
      q.tok_s.push_back(static_cast<double>(B) * g / sec);
      q.cpu_ms_per_tok.push_back(1000 * (cpu_seconds() - c0) / (static_cast<double>(B) * g));
    }
    out.push_back(std::move(q));
  }
};

// The roofline. Decode reads every matrix once per token (the embedding only one row), so its bound is
// bandwidth ÷ those bytes; prefill reuses each weight across the block, so its bound is the FMA peak ÷ 2
// flops per weight per token.
struct Roofline {
  double matrix_bytes = 0, layer_params = 0;
  std::map<int, double> bandwidth, read_bandwidth, flops;  // by thread count; empty with --no-roofline
};
Roofline roofline(const Weights& w, const std::vector<int>& thread_list, bool measure) {
  Roofline r;
  r.matrix_bytes = static_cast<double>(w.wcls.bytes);
  for (const auto& lw : w.layers)
    for (const Tensor* t : {&lw.wq, &lw.wk, &lw.wv, &lw.wo, &lw.w1, &lw.w2, &lw.w3}) {
      r.matrix_bytes += static_cast<double>(t->bytes);
      r.layer_params += static_cast<double>(t->numel());
    }
  if (measure)
    for (int th : thread_list) {
      r.bandwidth[th] = triad_bytes_per_s(th);
      r.read_bandwidth[th] = read_bytes_per_s(th);
      r.flops[th] = fma_flops_per_s(th);
    }
  return r;
}

// One typed row per test: the table, the CSV and the JSON are three views of the same rows.
std::vector<BenchRow> bench_rows(const std::vector<Result>& results, const Roofline& roof) {
  std::vector<BenchRow> rows;
  for (const auto& r : results) {
    const bool decode = r.test.rfind("tg", 0) == 0;
    BenchRow e;
    e.test = r.test;
    e.threads = r.threads;
    e.tokens = r.tokens;
    e.batch = r.batch;
    e.tok_s = median(r.tok_s);
    e.tok_s_sd = stddev(r.tok_s);
    e.ms_per_token = 1000 / e.tok_s;
    e.cpu_ms_per_token = median(r.cpu_ms_per_tok);
    if (!r.ttft_ms.empty()) e.ttft_ms = median(r.ttft_ms);
    e.eog_tokens = r.eog_tokens;
    if (roof.bandwidth.count(r.threads)) {
      // Decode: bytes actually streamed per second against the triad; prefill: flops against the FMA peak.
      // A batch reads the matrices once per step for all of its sequences: steps/s = tok/s ÷ batch.
      const double steps = e.tok_s / e.batch;
      e.roofline_fraction = decode ? steps * roof.matrix_bytes / roof.bandwidth.at(r.threads) : e.tok_s * 2 * roof.layer_params / roof.flops.at(r.threads);
      if (decode) e.read_fraction = steps * roof.matrix_bytes / roof.read_bandwidth.at(r.threads);
    }
    rows.push_back(std::move(e));
  }
  return rows;
}

void print_json(const Session& s, const RunOptions& opt, const BenchOpts& o, int block, double rss, const Roofline& roof,
                const std::vector<BenchRow>& rows) {
  nlohmann::json j = {{"model", s.header.model_path},
                      {"params", static_cast<double>(s.source->weights().parameter_count())},
                      {"weight_types", s.header.weight_types},
                      {"kernels", std::string(kernels::kernel_set())},
                      {"block", block},
                      {"repeat", o.repeat},
                      {"peak_rss_mib", rss},
                      {"decode_bytes_per_token", roof.matrix_bytes},
                      {"prefill_flops_per_token", 2 * roof.layer_params},
                      {"results", nlohmann::json::array()}};
  if (opt.ignore_eos) j["ignore_eos"] = true;
  for (const auto& [th, bw] : roof.bandwidth)
    j["machine"][std::to_string(th)] = {{"triad_gb_s", bw / 1e9}, {"read_gb_s", roof.read_bandwidth.at(th) / 1e9}, {"fma_gflop_s", roof.flops.at(th) / 1e9}};
  for (const auto& e : rows) j["results"].push_back(to_json(e));
  std::cout << j.dump(2) << "\n";
}

std::string opt_text(const std::optional<double>& v) { return v ? std::to_string(*v) : std::string(); }

void print_csv(const Session& s, double rss, const std::vector<BenchRow>& rows) {
  const std::string kset(kernels::kernel_set());
  // (read_roofline_fraction last: the columns before it are as they were)
  std::printf("model,kernels,test,threads,tokens,tok_s,tok_s_sd,ms_per_token,cpu_ms_per_token,ttft_ms,roofline_fraction,peak_rss_mib,"
              "read_roofline_fraction\n");
  for (const auto& e : rows)
    std::printf("%s,%s,%s,%d,%d,%.3f,%.3f,%.4f,%.4f,%s,%s,%.1f,%s\n", s.header.model_path.c_str(), kset.c_str(), e.test.c_str(), e.threads,
                e.tokens, e.tok_s, e.tok_s_sd, e.ms_per_token, e.cpu_ms_per_token, opt_text(e.ttft_ms).c_str(),
                opt_text(e.roofline_fraction).c_str(), rss, opt_text(e.read_fraction).c_str());
}

void print_table(const Session& s, const BenchOpts& o, int block, double rss, const Roofline& roof, const std::vector<BenchRow>& rows) {
  const Config& c = s.config;
  std::printf("model     %s (dim %d, %d layers, vocab %d; %s)\n", s.header.model_path.c_str(), c.dim, c.n_layers, c.vocab_size,
              s.header.weight_types.c_str());
  std::printf("kernels   %s    prefill blocks of %d    peak RSS %.0f MiB    median of %d runs\n", std::string(kernels::kernel_set()).c_str(),
              block, rss, o.repeat);
  for (const auto& [th, bw] : roof.bandwidth)
    std::printf("machine   %d thread%s: triad %.1f GB/s, read %.1f GB/s, FMA peak %.1f GFLOP/s\n", th, th == 1 ? "" : "s", bw / 1e9,
                roof.read_bandwidth.at(th) / 1e9, roof.flops.at(th) / 1e9);
  std::printf("\n%-14s %7s %12s %9s %10s %10s %10s %9s %8s\n", "test", "threads", "tok/s", "± sd", "ms/token", "cpu ms/tok", "ttft ms",
              "roofline", "of read");
  auto percent = [](const std::optional<double>& f) {
    return f ? std::to_string(static_cast<int>(std::lround(100 * *f))) + "%" : std::string("-");
  };
  for (const auto& e : rows) {
    const std::string roof_text = percent(e.roofline_fraction), read = percent(e.read_fraction);
    char ttft[32] = "-";
    if (e.ttft_ms) std::snprintf(ttft, sizeof ttft, "%.1f", *e.ttft_ms);
    std::printf("%-14s %7d %12.1f %9.1f %10.3f %10.3f %10s %9s %8s\n", e.test.c_str(), e.threads, e.tok_s, e.tok_s_sd, e.ms_per_token,
                e.cpu_ms_per_token, ttft, roof_text.c_str(), read.c_str());
  }
  for (const auto& e : rows)
    if (e.eog_tokens && *e.eog_tokens > 0)
      std::printf("\nnote: %s's greedy decode chose an end-of-generation token %d time%s, where a run would have stopped "
                  "at the first (--ignore-eos keeps them out)\n", e.test.c_str(), *e.eog_tokens, *e.eog_tokens == 1 ? "" : "s");
  std::printf("\nroofline: decode = bytes streamed per second (%.1f MB of matrices per token) / triad bandwidth (\"of read\": / the\n"
              "          read-only bandwidth, what decode's reads can reach); prefill = flops per second (%.1f MFLOP per token)\n"
              "          / FMA peak. ttft = the prefill's time.\n",
              roof.matrix_bytes / 1e6, 2 * roof.layer_params / 1e6);
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto o = std::make_shared<BenchOpts>();
  auto* cmd = app.add_subcommand("bench", "measure prefill and decode speed against this machine's roofline (like llama-bench)");
  auto binder = std::make_shared<RunOptionsBinder>(cmd, kBench);
  cmd->add_option("-p,--prompt-tokens", o->prompts, "prompt lengths to prefill, a list (default 128; shrunk to fit a small model)");
  cmd->add_option("-n,--gen-tokens", o->gens, "generation lengths to decode, a list (default 128)");
  cmd->add_option("-b,--batch", o->batches,
                  "sequences decoded together, a list: tgNxB decodes B sequences of N tokens with one batched forward pass per step "
                  "(tok/s counts all B·N tokens; default 1)");
  cmd->add_option("-r,--repeat", o->repeat, "runs per test; the median is reported (default 5)")->check(CLI::Range(1, 1000));
  cmd->add_option("--threads", o->threads, "thread counts, a list (default: one per physical core)");
  cmd->add_flag("--one-by-one", o->one_by_one, "also prefill each prompt one position per forward (the rate without blocks)");
  cmd->add_flag("--no-roofline", o->no_roofline, "skip measuring memory bandwidth and FMA peak");
  auto* json_flag = cmd->add_flag("--json", o->json, "print the results as JSON");
  cmd->add_flag("--csv", o->csv, "print the results as CSV")->excludes(json_flag);  // one format on stdout
  cmd->callback([o, binder, cmd] {
    RunOptions opt = binder->finish();
    opt.sampler = {{"greedy", {}}};
    std::vector<int> prompts = int_list(o->prompts, "--prompt-tokens"), gens = int_list(o->gens, "--gen-tokens");
    const std::vector<int> batches = int_list(o->batches, "--batch");
    std::vector<int> thread_list = o->threads.empty() ? std::vector<int>{kernels::threads()} : int_list(o->threads, "--threads");
    for (int t : thread_list)
      if (t > 1024) throw ConfigError("--threads: " + std::to_string(t) + " (expected 1..1024)");
    for (int b : batches)
      if (b < 1 || b > 256) throw ConfigError("--batch: " + std::to_string(b) + " (expected 1..256)");
    opt.model_hash = false;  // no trace: start-up is not spent hashing the model
    opt.need_vocabulary = false;  // token ids only: a llama2.c checkpoint needs no tokenizer file here
    auto s = open_session(opt);
    // Defaults that do not fit a small model's context shrink to it; given lengths must fit.
    const bool given = cmd->get_option("--prompt-tokens")->count() > 0 || cmd->get_option("--gen-tokens")->count() > 0;
    auto fit = [&](std::vector<int>& v, const char* flag, int extra) {
      for (int& x : v) {
        if (x + extra <= s->config.seq_len) continue;
        if (!given) x = std::max(1, s->config.seq_len / 2);
        else throw ConfigError(std::string(flag) + " " + std::to_string(x) + (extra ? " + 1" : "") + " exceeds the run's context of " +
                               std::to_string(s->config.seq_len));
      }
    };
    fit(prompts, "--prompt-tokens", 0);
    fit(gens, "--gen-tokens", 1);  // decode starts after BOS

    const int longest = *std::max_element(prompts.begin(), prompts.end());
    Bench bench(*s, opt, *o, longest, *std::max_element(batches.begin(), batches.end()));
    std::vector<Result> results;
    for (int th : thread_list) {
      kernels::set_threads(th);
      s->attention->clear();  // a sequence starts empty: the store refuses a write over what it holds
      bench.prefill(*s->model, std::min(longest, bench.block), bench.block);  // warm-up: pages, caches, thread pool
      for (int p : prompts) bench.prefill_tests(th, p, results);
      for (int g : gens) {
        bench.decode_test(th, g, results);
        for (int B : batches)
          if (B > 1) bench.batched_test(th, g, B, results);
      }
    }
    const double rss = peak_rss_mib();  // before the roofline's arrays
    const Roofline roof = roofline(s->source->weights(), thread_list, !o->no_roofline);
    const std::vector<BenchRow> rows = bench_rows(results, roof);
    if (o->json) print_json(*s, opt, *o, bench.block, rss, roof, rows);
    else if (o->csv) print_csv(*s, rss, rows);
    else print_table(*s, *o, bench.block, rss, roof, rows);
  });
}

}  // namespace glassbox::cli
