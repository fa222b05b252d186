// `glassbox run --show-probs`: bar charts of each step's candidates on stderr; stdout stays the text.
#define BOOST_TEST_MODULE trace_terminal
#include <boost/test/unit_test.hpp>

#include <sstream>

#include "glassbox/traces/terminal.hpp"
#include "support.hpp"
#include "trace_fixtures.hpp"

using namespace gbtest;

namespace {

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

// Four pieces: "a", "b", "c", "d".
class FakeTokenizer final : public glassbox::Tokenizer {
 public:
  std::vector<std::int32_t> encode(std::string_view, const glassbox::EncodeOptions&) const override { return {0}; }
  std::string_view decode(std::int32_t, std::int32_t id) const override { return kPieces[id]; }
  std::string_view piece(std::int32_t id) const override { return kPieces[id]; }
  std::int32_t vocab_size() const override { return 4; }
  std::int32_t bos_id() const override { return 0; }
  std::int32_t eos_id() const override { return 3; }

 private:
  static constexpr const char* kPieces[] = {"a", "b", "c", "d"};
};

glassbox::StepEvent event(int step, std::int32_t token, const std::vector<glassbox::TokenProb>& top,
                          const std::vector<std::int32_t>& input) {
  glassbox::StepEvent e;
  e.step = step;
  e.pos = step;
  e.input_ids = input;
  e.token = token;
  e.token_text = token == 1 ? "b" : "c";
  e.top = top;
  for (const auto& t : top)
    if (t.id == token) e.prob = t.prob;
  return e;
}

}  // namespace

BOOST_AUTO_TEST_CASE(each_chart_is_written_after_its_token_under_it) {
  FakeTokenizer tok;
  std::ostringstream err;
  glassbox::traces::ProbsSink sink(err, tok, 3, 8);
  const std::vector<glassbox::TokenProb> top = {{1, 2.0f, 0.75f}, {2, 1.0f, 0.25f}};
  const std::vector<std::int32_t> in = {0};
  sink.header({});
  sink.step(event(0, 1, top, in));
  BOOST_TEST(err.str().empty());  // its token has not been printed yet
  sink.step(event(1, 2, top, in));
  const std::string first = err.str();
  BOOST_TEST(count(first, "── step 0") == 1u);
  BOOST_TEST(count(first, "── step 1") == 0u);
  BOOST_TEST(first.find("\"b\"") != std::string::npos);
  BOOST_TEST(first.find("██████   0.750 ◀") != std::string::npos, first);  // 0.75 of 8 cells
  BOOST_TEST(first.find("██       0.250\n") != std::string::npos, first);
  sink.summary({});
  BOOST_TEST(count(err.str(), "── step 1") == 1u);
  BOOST_TEST(err.str().find("██       0.250 ◀") != std::string::npos, err.str());
}

BOOST_AUTO_TEST_CASE(a_chosen_token_outside_the_list_is_still_shown) {
  FakeTokenizer tok;
  const std::vector<glassbox::TokenProb> top = {{1, 2.0f, 0.9f}};
  const std::vector<std::int32_t> in = {0};
  auto e = event(0, 2, top, in);
  e.prob = 0.05f;
  const std::string chart = glassbox::traces::probs_chart(e, tok, 1, 10);
  BOOST_TEST(chart.find("not in the top 1") != std::string::npos, chart);
}

BOOST_AUTO_TEST_CASE(show_probs_leaves_stdout_alone, *boost::unit_test::precondition(NeedsShared())) {
  std::vector<std::string> a = {"run"};
  for (const auto& x : stories_args()) a.push_back(x);
  for (const auto& x : {"--prompt", "Once upon a time", "--max-tokens", "10", "--sampler", "top-k:40,temperature:0.8",
                        "--seed", "7"})
    a.push_back(x);
  const auto plain = run_cli(a);
  a.push_back("--show-probs");
  const auto shown = run_cli(a);
  BOOST_TEST_REQUIRE(plain.rc == 0, plain.err);
  BOOST_TEST_REQUIRE(shown.rc == 0, shown.err);
  BOOST_TEST(shown.out == plain.out);
  BOOST_TEST(count(shown.err, "── step ") == 10u, shown.err);
  BOOST_TEST(count(shown.err, "◀") == 10u);
  BOOST_TEST(count(shown.err, "after chain") == 10u);  // more than one stage: the chain's column
  BOOST_TEST(plain.err.find("── step") == std::string::npos);
}
