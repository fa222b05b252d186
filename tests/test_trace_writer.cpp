// The trace writer: float text, step lines (the one serializer, step_text.cpp: the writer's line read back
// and written again is the same text), and the writer thread (same file as without it, errors surface).
#define BOOST_TEST_MODULE trace_writer
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>
#include <unistd.h>
#include <sys/stat.h>
#include <fcntl.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <future>
#include <thread>
#include <limits>
#include <random>
#include <sstream>

#include "alloc_counter.hpp"
#include "glassbox/error.hpp"
#include "glassbox/traces/writer.hpp"
#include "support.hpp"
#include "trace_fixtures.hpp"

using namespace gbtest;
using glassbox::traces::append_json_float;
namespace bdata = boost::unit_test::data;

namespace {

// Pieces that exercise the escaping: plain, a quote and a backslash, a control byte, UTF-8, half a character.
class FakeTokenizer final : public glassbox::Tokenizer {
 public:
  std::vector<std::int32_t> encode(std::string_view, const glassbox::EncodeOptions&) const override { return {0}; }
  std::string_view decode(std::int32_t, std::int32_t id) const override { return kPieces[id % 6]; }
  std::string_view piece(std::int32_t id) const override { return kPieces[id % 6]; }
  std::int32_t vocab_size() const override { return 50; }  // (a full step has 50 logits)
  std::int32_t bos_id() const override { return 0; }
  std::int32_t eos_id() const override { return 5; }

 private:
  static constexpr const char* kPieces[] = {" once", "say \"hi\\\"", "tab\there\n", "caf\xc3\xa9 \xe2\x96\x81", "\xe2\x96", "~\x7f"};
};

std::string fmt(float f) {
  std::string s;
  append_json_float(s, f);
  return s;
}

// nlohmann-json's text of the float as the trace wrote it before (json_float, then its printer).
std::string nlohmann_text(float f) { return glassbox::traces::dump(nlohmann::json(glassbox::traces::json_float(f))); }

}  // namespace

// Written out by hand (nlohmann-json's layout: ".0" on integers, two-digit exponents, fixed from 1e-4 to 1e15).
BOOST_DATA_TEST_CASE(float_text_has_nlohmann_json_layout,
                     bdata::make({0.45f, 100.0f, 1e-5f, 1.5e-5f, -0.0f, 0.0f, 1e-4f, 0.00012345f, 1e14f, 1e15f, 1e16f,
                                  -2.5f, 3.4028235e38f, 1e-45f, 0.9687944f, 17.799397f}) ^
                         bdata::make({"0.45", "100.0", "1e-05", "1.5e-05", "-0.0", "0.0", "0.0001", "0.00012345",
                                      "100000000000000.0", "1e+15", "1e+16", "-2.5", "3.4028235e+38", "1e-45",
                                      "0.9687944", "17.799397"}),
                     f, text) {
  BOOST_TEST(fmt(f) == std::string(text));
}

BOOST_AUTO_TEST_CASE(non_finite_floats_are_null_as_nlohmann_json_writes_them) {
  BOOST_TEST(fmt(std::numeric_limits<float>::quiet_NaN()) == "null");
  BOOST_TEST(fmt(std::numeric_limits<float>::infinity()) == "null");
  BOOST_TEST(fmt(-std::numeric_limits<float>::infinity()) == "null");
}

// Over random bit patterns: the text reads back as the same float, is never longer than nlohmann-json's,
// and is the same text whenever that one is as short (its printer sometimes adds digits: 0.9687944000000001).
BOOST_AUTO_TEST_CASE(float_text_round_trips_and_is_never_longer_than_nlohmann_json) {
  std::mt19937 g(12345);
  int same = 0, checked = 0;
  for (int i = 0; i < 300000; ++i) {
    const std::uint32_t bits = g();
    float f;
    std::memcpy(&f, &bits, sizeof f);
    if (!std::isfinite(f)) continue;
    ++checked;
    const std::string a = fmt(f), b = nlohmann_text(f);
    double d = 0;
    const auto r = std::from_chars(a.data(), a.data() + a.size(), d);
    BOOST_TEST_REQUIRE((r.ec == std::errc() && r.ptr == a.data() + a.size()), "unparsable: " << a);
    if (static_cast<float>(d) != f || std::signbit(static_cast<float>(d)) != std::signbit(f))
      BOOST_FAIL("bits " << bits << ": " << a << " reads back as another float");
    if (a.size() > b.size()) BOOST_FAIL("bits " << bits << ": " << a << " is longer than nlohmann-json's " << b);
    if (a.size() == b.size() && a != b) BOOST_FAIL("bits " << bits << ": " << a << " differs from nlohmann-json's " << b);
    same += a == b;
  }
  BOOST_TEST(same > checked * 9 / 10, same << " of " << checked << " the same text as nlohmann-json's");
}

namespace {

// A float whose nlohmann-json text is already the shortest, so that the two step texts are byte-equal.
float nice(std::mt19937& g, float scale) {
  std::normal_distribution<float> d(0.0f, scale);
  for (;;) {
    const float f = d(g);
    if (fmt(f) == nlohmann_text(f)) return f;
  }
}

struct EventData {
  std::vector<std::int32_t> input;
  std::vector<glassbox::TokenProb> top;
  std::vector<float> logits;
  std::vector<glassbox::StageRecord> stages;
  glassbox::Params params;
  glassbox::KvState kv;
  std::vector<glassbox::AttentionRow> attention;
  std::vector<glassbox::LensRecord> lens;
  glassbox::StepEvent e;
};

// Variant v switches the optional parts on and off: logits, attention, lens, forced, paged KV, no KV, no draw.
void make_event(EventData& d, int v) {
  std::mt19937 g(v + 1);
  d.input = v % 2 ? std::vector<std::int32_t>{0, 1, 2} : std::vector<std::int32_t>{3};
  for (int i = 0; i < 6; ++i) d.top.push_back({(i + v) % 6, nice(g, 5), std::abs(nice(g, 0.04f))});
  // (a valid step, as a reader checks it: top sorted by logit, log-probabilities <= 0, probabilities that
  // sum to at most 1: six of |N(0, 0.04)|)
  std::sort(d.top.begin(), d.top.end(), [](const auto& a, const auto& b) { return a.logit > b.logit; });
  if (v % 3 == 0)
    for (int i = 0; i < 50; ++i) d.logits.push_back(nice(g, 8));
  d.params.set("k", std::int64_t{40});
  d.params.set("temp", 0.8);
  d.params.set("name", std::string("a \"b\""));
  d.params.set("on", v % 2 == 0);
  d.stages.resize(2);
  // stage 0 sometimes carries a draw of its own (as xtc's coin), written as the optional "u"
  d.stages[0] = {"top-k", &d.params, 40, std::min(std::abs(nice(g, 1)), 1.0f), std::abs(nice(g, 2)), v % 3 == 0 ? 0.25f : -1.0f, {d.top[0], d.top[1]}};
  d.stages[1] = {"dist", nullptr, 2, 1.0f, 0.0f, -1.0f, {d.top[1]}};
  d.kv.module = v % 4 == 1 ? "" : "paged";
  d.kv.params.set("block_size", std::int64_t{16});
  d.kv.tokens = 17 + v;
  d.kv.capacity = 512;
  d.kv.bytes = 1 << 20;
  d.kv.first_pos = v;
  d.kv.evicted = 2;
  if (v % 2) {
    d.kv.block_size = 16;
    d.kv.blocks_used = 2;
    d.kv.blocks_free = 30;
    d.kv.last_block_unused = 15;
    d.kv.block_table = {3, 7};
  }
  if (v % 4 == 2) d.attention = {{0, 1, 5, 0, {std::abs(nice(g, 0.3f)), std::abs(nice(g, 0.3f)), std::abs(nice(g, 0.3f))}}, {1, 0, 5, 2, {}}};
  // the logit lens: a point inside block 1 (after attention) and after it; tokens named here come first in
  // the line, so their texts must come first from the copy too
  if (v % 3 != 1) d.lens = {{1, true, std::abs(nice(g, 2)), {d.top[2], d.top[3]}}, {1, false, std::abs(nice(g, 2)), {d.top[4]}}};
  auto& e = d.e;
  e.phase = v == 0 ? "prefill" : "decode";
  e.step = v;
  e.pos = 4 + v;
  e.input_ids = d.input;
  e.token = d.top[0].id;
  e.token_text = FakeTokenizer().decode(0, e.token);
  e.prob = d.top[0].prob;
  e.logprob = -std::abs(nice(g, 1));
  e.chain_prob = std::min(std::abs(nice(g, 1)), 1.0f);
  e.entropy = std::abs(nice(g, 2));
  e.top = d.top;
  e.logits = d.logits;
  e.stages = d.stages;
  e.draw_u = v % 3 == 1 ? -1.0f : std::min(std::abs(nice(g, 0.5f)), 0.5f);
  e.sampled = v % 2 ? -1 : v > 0 ? d.top[1].id : d.top[0].id;  // (differs from the token only when forced)
  e.forced = v % 2 == 0 && v > 0;
  e.kv = v == 3 ? nullptr : &d.kv;
  e.attention_dots = 1234 * v;
  e.attention = d.attention;
  e.lens = d.lens;
  e.ms = 0.25 + v;
}

}  // namespace

// The line the writer writes, read back (step_record: parse_step of it) and written again by to_json, is
// the same text: the writer's copy of an engine step (float32 reals) and a read step (doubles) go through
// the one serializer and say the same.
BOOST_DATA_TEST_CASE(step_line_is_step_json_as_nlohmann_json_prints_it, bdata::xrange(8), v) {
  FakeTokenizer tok;
  EventData d;
  make_event(d, v);
  BOOST_TEST(glassbox::traces::step_line(d.e, tok) == glassbox::traces::dump(glassbox::traces::step_json(d.e, tok)));
}

// A float that is not a number (a broken model's probability) is written as null, never as "nan" (not JSON).
BOOST_AUTO_TEST_CASE(a_nan_is_written_as_null) {
  FakeTokenizer tok;
  EventData d;
  make_event(d, 5);
  d.e.chain_prob = std::numeric_limits<float>::quiet_NaN();
  const std::string line = glassbox::traces::step_line(d.e, tok);
  BOOST_TEST(line.find("\"draw\":{\"prob\":null,") != std::string::npos, line);
  BOOST_CHECK_NO_THROW((void)nlohmann::json::parse(line));
}

namespace {
std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_run(const std::filesystem::path& path, glassbox::traces::WriterThread thread, int steps,
               glassbox::traces::StepCopies* reuse = nullptr, int first_variant = 0) {
  FakeTokenizer tok;
  glassbox::traces::JsonlWriter w(path.string(), tok, false, thread, glassbox::traces::LogitsEncoding::Base64, {},
                                  glassbox::OutputFile::Live::Allowed, reuse);
  w.header({});
  for (int i = 0; i < steps; ++i) {
    EventData d;
    make_event(d, (first_variant + i) % 8);
    d.e.step = i;
    w.step(d.e);  // d (and the spans the event points into) dies right after: the writer must have copied
  }
  w.flush();
  w.summary({});
}
}  // namespace

BOOST_TEST_DONT_PRINT_LOG_VALUE(glassbox::traces::WriterThread)

const auto kWriterThreads = bdata::make({glassbox::traces::WriterThread::None, glassbox::traces::WriterThread::EveryLine,
                                         glassbox::traces::WriterThread::Batched});

// 200 steps: more than a batched writer's ring of lines holds, so step() also waits for the thread.
BOOST_DATA_TEST_CASE(the_writer_thread_writes_the_same_file_as_the_calling_thread,
                     bdata::make({glassbox::traces::WriterThread::EveryLine, glassbox::traces::WriterThread::Batched}), thread) {
  const auto dir = temp_dir("writer");
  write_run(dir / "sync.jsonl", glassbox::traces::WriterThread::None, 200);
  write_run(dir / "thread.jsonl", thread, 200);
  const std::string a = slurp(dir / "sync.jsonl"), b = slurp(dir / "thread.jsonl");
  BOOST_TEST(std::count(a.begin(), a.end(), '\n') == 202);
  BOOST_TEST((a == b));
}

namespace {
// Counts decode() calls made from any thread but the one that created it.
class CallerOnlyTokenizer final : public glassbox::Tokenizer {
 public:
  std::vector<std::int32_t> encode(std::string_view s, const glassbox::EncodeOptions& o) const override { return fake_.encode(s, o); }
  std::string_view decode(std::int32_t prev, std::int32_t id) const override {
    ++(std::this_thread::get_id() == owner_ ? calls : foreign);
    return fake_.decode(prev, id);
  }
  std::string_view piece(std::int32_t id) const override { return fake_.piece(id); }
  std::int32_t vocab_size() const override { return fake_.vocab_size(); }
  std::int32_t bos_id() const override { return fake_.bos_id(); }
  std::int32_t eos_id() const override { return fake_.eos_id(); }
  mutable std::atomic<int> calls{0}, foreign{0};

 private:
  FakeTokenizer fake_;
  std::thread::id owner_ = std::this_thread::get_id();
};
}  // namespace

// A tokenizer module is only called from the decoding thread: step() decodes the texts a line needs
// before it hands the step to the writer thread.
BOOST_DATA_TEST_CASE(the_writer_thread_never_calls_the_tokenizer,
                     bdata::make({glassbox::traces::WriterThread::EveryLine, glassbox::traces::WriterThread::Batched}), thread) {
  const auto dir = temp_dir("caller");
  CallerOnlyTokenizer tok;
  {
    glassbox::traces::JsonlWriter w((dir / "t.jsonl").string(), tok, false, thread);
    w.header({});
    for (int i = 0; i < 100; ++i) {
      EventData d;
      make_event(d, i % 8);
      w.step(d.e);
    }
    w.summary({});
  }
  BOOST_TEST(tok.calls.load() > 0);
  BOOST_TEST(tok.foreign.load() == 0);
}

// A live output (a FIFO: someone reads the trace as it is made) gets a batch not yet full within the
// writer's poll (2-16 ms), not at the next flush, also after the thread has gone to sleep for want of
// lines (a chat waiting for its user). A regular file (a temporary file until the summary, read by
// nobody before) gets them at a poll only while a core is spare; while none is, when half the ring
// waits or at a flush (a write then would take a core from the model; docs/performance.md, "Round ten").
BOOST_AUTO_TEST_CASE(a_batched_writer_writes_live_output_without_being_asked) {
  FakeTokenizer tok;
  const auto dir = temp_dir("latency");
  const auto fifo = dir / "live.jsonl";
  BOOST_TEST_REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const int rfd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);  // a reader first: the writer's open then returns
  BOOST_TEST_REQUIRE(rfd >= 0);
  std::string got;
  const auto lines_within_2s = [&](std::size_t want) {
    std::size_t lines = 0;
    for (int tries = 0; tries < 200 && lines < want; ++tries) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      char buf[1 << 16];
      for (ssize_t n; (n = ::read(rfd, buf, sizeof buf)) > 0;) got.append(buf, static_cast<std::size_t>(n));
      lines = static_cast<std::size_t>(std::count(got.begin(), got.end(), '\n'));
    }
    return lines;
  };
  {
    glassbox::traces::JsonlWriter w(fifo.string(), tok, false, glassbox::traces::WriterThread::Batched);
    w.header({});
    EventData d;
    make_event(d, 1);
    for (int i = 0; i < 3; ++i) w.step(d.e);
    std::size_t lines = lines_within_2s(4);
    BOOST_TEST(lines == 4u, "header and 3 steps expected from the FIFO within 2 s, found " << lines << " lines");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // (the thread now sleeps without a timeout)
    for (int i = 0; i < 2; ++i) w.step(d.e);
    lines = lines_within_2s(6);
    BOOST_TEST(lines == 6u, "2 more steps expected within 2 s of an idle spell, found " << lines - 4 << " more lines");
    w.summary({});
  }
  ::close(rfd);

  // A regular file: with a core spare, the steps arrive at a poll; with none, they wait for a flush or
  // for half the ring.
  const auto lines_in = [&](const std::filesystem::path& sub) {
    std::size_t lines = 0;
    for (const auto& f : std::filesystem::directory_iterator(sub)) {
      const std::string text = slurp(f.path());
      lines += static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
    }
    return lines;
  };
  const auto lines_in_2s = [&](const std::filesystem::path& sub, std::size_t want) {
    std::size_t lines = 0;
    for (int tries = 0; tries < 200 && lines < want; ++tries) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      lines = lines_in(sub);
    }
    return lines;
  };
  for (const bool spare : {true, false}) {
    const auto sub = dir / (spare ? "spare" : "busy");
    std::filesystem::create_directory(sub);
    std::atomic<int> asked{0};
    glassbox::traces::JsonlWriter w((sub / "t.jsonl").string(), tok, false, glassbox::traces::WriterThread::Batched,
                                   glassbox::traces::LogitsEncoding::Base64, [&] { ++asked; return spare; });
    w.header({});
    EventData d;
    make_event(d, 1);
    for (int i = 0; i < 3; ++i) w.step(d.e);
    BOOST_TEST_CONTEXT((spare ? "a core spare" : "no core spare")) {
      if (spare) {
        BOOST_TEST(lines_in_2s(sub, 4) == 4u, "header and 3 steps expected within 2 s");
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        BOOST_TEST(asked.load() > 0);  // it polled, and found no core to write on
        BOOST_TEST(lines_in(sub) == 1u, "only the header expected before a flush");
        w.flush();
        BOOST_TEST(lines_in(sub) == 4u);
        for (int i = 0; i < 600; ++i) w.step(d.e);  // over half the ring: the thread is woken for them
        const std::size_t lines = lines_in_2s(sub, 4 + 512);
        BOOST_TEST(lines >= 4u + 512u, "half the ring's steps expected without a flush, found " << lines - 4);
      }
    }
    w.summary({});
  }
}

namespace {
class PlainTokenizer final : public glassbox::Tokenizer {
 public:
  std::vector<std::int32_t> encode(std::string_view, const glassbox::EncodeOptions&) const override { return {0}; }
  std::string_view decode(std::int32_t, std::int32_t) const override { return " once"; }
  std::string_view piece(std::int32_t) const override { return " once"; }
  std::int32_t vocab_size() const override { return 50; }  // (a full step has 50 logits)
  std::int32_t bos_id() const override { return 0; }
  std::int32_t eos_id() const override { return 5; }
};
}  // namespace

// Tracing keeps the decode loop's promise: once the recycled lines have grown, a step allocates nothing
// (neither on the calling thread nor on the writer thread), full-logit steps included.
BOOST_DATA_TEST_CASE(a_traced_step_allocates_nothing_after_warm_up, kWriterThreads, thread) {
  PlainTokenizer tok;
  EventData d;
  make_event(d, 0);  // with logits
  d.e.token_text = " once";
  d.stages[0].params = nullptr;  // (a string parameter with quotes takes nlohmann-json's escaping)
  const auto dir = temp_dir("alloc");
  glassbox::traces::JsonlWriter w((dir / "t.jsonl").string(), tok, false, thread);
  for (int i = 0; i < 2100; ++i) w.step(d.e);  // every copy of the ring (up to 1,024) used, at least once
  w.flush();
  const long before = g_allocs.load();
  for (int i = 0; i < 100; ++i) w.step(d.e);
  w.flush();
  BOOST_TEST(g_allocs.load() - before == 0, "allocations in 100 traced steps: " << g_allocs.load() - before);
}

// serve's slots hand one writer's step copies to the next (StepCopies): a copy that held another step
// (logits, attention, lens, paged KV, a forced token) leaves nothing of it in the next trace.
BOOST_DATA_TEST_CASE(reused_step_copies_write_the_same_files_as_fresh_ones,
                     bdata::make({glassbox::traces::WriterThread::EveryLine, glassbox::traces::WriterThread::Batched}), thread) {
  const auto dir = temp_dir("reuse");
  glassbox::traces::StepCopies copies;
  for (int first : {0, 3, 5}) {
    const std::string n = std::to_string(first);
    write_run(dir / ("fresh" + n + ".jsonl"), thread, 300, nullptr, first);
    write_run(dir / ("reused" + n + ".jsonl"), thread, 300, &copies, first);
    const std::string a = slurp(dir / ("fresh" + n + ".jsonl")), b = slurp(dir / ("reused" + n + ".jsonl"));
    BOOST_TEST(std::count(a.begin(), a.end(), '\n') == 302);
    BOOST_TEST((a == b), "trace " << first << " written with reused copies differs from the fresh one");
  }
}

// ... and the next writer's steps allocate nothing from the start: its copies' buffers have grown in the
// earlier trace. (A fresh writer's 100 steps, queued faster than a poll, fill 100 fresh copies.)
BOOST_AUTO_TEST_CASE(a_writer_given_used_step_copies_allocates_nothing_in_its_steps) {
  PlainTokenizer tok;
  EventData d;
  make_event(d, 1);
  d.e.token_text = " once";
  d.stages[0].params = nullptr;
  const auto dir = temp_dir("reuse-alloc");
  glassbox::traces::StepCopies copies;
  auto hundred_steps = [&](const char* name, glassbox::traces::StepCopies* reuse, int warm_up) {
    glassbox::traces::JsonlWriter w((dir / name).string(), tok, false, glassbox::traces::WriterThread::Batched,
                                    glassbox::traces::LogitsEncoding::Base64, [] { return true; }, glassbox::OutputFile::Live::Allowed, reuse);
    for (int i = 0; i < warm_up; ++i) w.step(d.e);
    w.flush();  // (the writer thread's own line buffers have grown)
    const long before = g_allocs.load();
    for (int i = 0; i < 100; ++i) w.step(d.e);
    const long n = g_allocs.load() - before;
    w.flush();
    return n;
  };
  (void)hundred_steps("first.jsonl", &copies, 2100);  // every copy of the ring used
  BOOST_TEST(hundred_steps("fresh.jsonl", nullptr, 4) > 0);  // the test can fail: fresh copies allocate
  BOOST_TEST(hundred_steps("reused.jsonl", &copies, 4) == 0);
}

BOOST_AUTO_TEST_CASE(a_write_error_on_the_writer_thread_is_thrown_by_the_next_call) {
  if (!std::filesystem::exists("/dev/full")) {
    BOOST_TEST_MESSAGE("skipped: no /dev/full");
    return;
  }
  FakeTokenizer tok;
  glassbox::traces::JsonlWriter w("/dev/full", tok);
  EventData d;
  make_event(d, 1);
  w.step(d.e);  // queued: the thread's write fails
  BOOST_CHECK_EXCEPTION(w.flush(), glassbox::OutputError,
                        [](const glassbox::OutputError& e) { return std::string(e.what()).find("/dev/full") != std::string::npos; });
  BOOST_CHECK_THROW(w.step(d.e), glassbox::OutputError);
  BOOST_CHECK_THROW(w.error("stopped"), glassbox::OutputError);
}

// A digest still being computed (run --trace hashes the model while it runs): the header waits for it and
// is still the first line, with the digest, whether steps follow or the run is cut short before any step;
// steps handed over before the digest is ready stay queued behind the header.
BOOST_DATA_TEST_CASE(a_pending_model_digest_is_written_in_the_header_first,
                     kWriterThreads * bdata::make({0, 3, 40}), thread, steps) {
  FakeTokenizer tok;
  const auto dir = temp_dir("digest");
  const auto path = dir / "t.jsonl";
  std::promise<std::string> digest;
  std::shared_future<std::string> ready = digest.get_future().share();
  std::thread hasher;
  {
    glassbox::traces::JsonlWriter w(path.string(), tok, false, thread);
    glassbox::RunHeader h;
    h.model_sha256_pending = [ready] { return ready.get(); };
    w.header(h);
    hasher = std::thread([&digest] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      digest.set_value("0123abcd");
    });
    EventData d;
    make_event(d, 1);
    for (int i = 0; i < steps; ++i) w.step(d.e);
    if (steps == 0) w.error("stopped before the first step");
    else w.summary({});
  }
  hasher.join();
  const auto lines = read_jsonl(std::filesystem::exists(path) ? path : std::filesystem::path(path.string() + ".partial"));
  BOOST_TEST_REQUIRE(lines.size() == static_cast<std::size_t>(steps + 2));
  BOOST_TEST(lines[0]["model"]["sha256"] == "0123abcd");
  BOOST_TEST((lines[0].contains("max_tokens") && !lines[0].contains("step")));  // the header, not a step
  for (int i = 1; i <= steps; ++i) BOOST_TEST(lines[i].contains("step"));
}
