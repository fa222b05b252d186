// Amnesia, measured: the toy model recalls a name given early in a `glassbox chat` conversation while
// that turn is in the window, and only guesses once chat's pruning drops it; docs/attention.md shows these figures.
#define BOOST_TEST_MODULE recall
#include <boost/test/unit_test.hpp>

#include <map>
#include <sstream>

#include "support.hpp"

namespace fs = std::filesystem;
using gbtest::run_cli;

namespace {

const fs::path kDoc = fs::path(GLASSBOX_SOURCE_DIR) / "docs" / "attention.md";

bool toy_installed() { return fs::exists(fs::path(GLASSBOX_BINARY_DIR) / "share/glassbox/models/toy.bin"); }
struct NeedsToy {
  boost::test_tools::assertion_result operator()(boost::unit_test::test_unit_id) const {
    boost::test_tools::assertion_result r(toy_installed());
    if (!r) r.message() << "the embedded toy model is not built (models/toy/toy.bin missing)";
    return r;
  }
};

// The toy world's conversations (models/toy/grammar.py, kind 4): the names, two of its small-talk
// user lines, and the fact / question / answer sentences it was trained on.
const std::vector<std::string> kNames = {"Lily", "Tom", "Mia", "Ben", "Anna", "Sam", "Zoe", "Max", "Lucy", "Jack"};
const std::vector<std::string> kSmallTalk = {"How are you?", "Where should we go?"};
const int kContexts[] = {128, 96, 72};
const int kMaxTokens = 12;  // room chat keeps for each reply: "Your name is Lily." is 7 tokens + EOS

struct Cell {
  int fillers = 0, context = 0;
  int kept = 0, right_kept = 0, dropped = 0, right_dropped = 0;
  std::map<std::string, int> answers_dropped;  // what it says when the name is gone
};

struct Outcome {
  bool kept, right;
  std::string answer;
};

// One conversation through `glassbox chat` (greedy): the name, `fillers` exchanges of small talk
// (the model writes its own replies), then the question. Kept = chat dropped nothing (the first
// exchange, which holds the name, is always the first to go).
Outcome converse(const std::string& name, int fillers, int context) {
  const fs::path dir = gbtest::temp_dir("recall");
  std::string lines = "My name is " + name + ".\n";
  for (int i = 0; i < fillers; ++i) lines += kSmallTalk[static_cast<std::size_t>(i)] + "\n";
  lines += "What is my name?\n";
  gbtest::write_file(dir / "turns.txt", lines);
  auto r = run_cli({"chat", "--input", (dir / "turns.txt").string(), "--sampler", "greedy", "--max-tokens",
                    std::to_string(kMaxTokens), "--context", std::to_string(context)});
  fs::remove_all(dir);
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  std::vector<std::string> replies;
  std::istringstream out(r.out);
  for (std::string l; std::getline(out, l);) replies.push_back(l);
  BOOST_TEST_REQUIRE(replies.size() == static_cast<std::size_t>(fillers + 2), "one reply per turn:\n" << r.out);
  std::string answer = replies.back();
  answer.erase(0, answer.find_first_not_of(' '));
  return {r.err.find("dropped the oldest") == std::string::npos, answer == "Your name is " + name + ".", answer};
}

const std::vector<Cell>& experiment() {
  static const std::vector<Cell> cells = [] {
    std::vector<Cell> v;
    for (int k = 0; k <= static_cast<int>(kSmallTalk.size()); ++k)
      for (int c : kContexts) {
        Cell cell;
        cell.fillers = k;
        cell.context = c;
        for (const auto& n : kNames) {
          const Outcome o = converse(n, k, c);
          if (o.kept) {
            ++cell.kept;
            cell.right_kept += o.right;
          } else {
            ++cell.dropped;
            cell.right_dropped += o.right;
            ++cell.answers_dropped[o.answer];
          }
        }
        v.push_back(cell);
      }
    return v;
  }();
  return cells;
}

// The figures block of docs/attention.md, from what chat answers now.
std::string figures() {
  std::ostringstream md;
  const int n = static_cast<int>(kNames.size());
  md << "| small talk before the question | `--context` | name still in the window | right answers |\n"
     << "|---|---|---|---|\n";
  int dropped = 0, right_dropped = 0, kept = 0, right_kept = 0;
  std::map<std::string, int> guesses;
  for (const auto& c : experiment()) {
    md << "| " << c.fillers << (c.fillers == 1 ? " exchange" : " exchanges") << " | " << c.context << " | " << c.kept << " of " << n
       << " | " << c.right_kept + c.right_dropped << " of " << n << " |\n";
    kept += c.kept, right_kept += c.right_kept, dropped += c.dropped, right_dropped += c.right_dropped;
    for (const auto& [a, k] : c.answers_dropped) guesses[a] += k;
  }
  md << "\nName in the window: " << right_kept << " right of " << kept << ". Name pruned: " << right_dropped << " right of "
     << dropped << " (a blind guess among " << n << " names is right 1 time in " << n << "); the answers then were";
  std::string sep = " ";
  for (const auto& [a, k] : guesses) md << sep << "\"" << a << "\" (" << k << ")", sep = ", ";
  md << ".\n";
  return md.str();
}

const std::string kBegin = "<!-- recall:begin (written by GLASSBOX_UPDATE_DOCS=1 ctest -R test_recall) -->\n";
const std::string kEnd = "<!-- recall:end -->";

}  // namespace

BOOST_AUTO_TEST_SUITE(recall, *boost::unit_test::precondition(NeedsToy()))

// The windows do what the doc says: the short conversation always fits, the longest never fits the
// smallest window, so both sides of the comparison are measured.
BOOST_AUTO_TEST_CASE(the_windows_keep_and_drop_the_name) {
  const auto& cells = experiment();
  const int n = static_cast<int>(kNames.size());
  for (const auto& c : cells) {
    if (c.fillers == 0) BOOST_TEST(c.kept == n, "0 exchanges, --context " << c.context);
    if (c.fillers == static_cast<int>(kSmallTalk.size()) && c.context == kContexts[2]) BOOST_TEST(c.dropped == n);
  }
}

// Right while the name is in the window (>= 90%), chance once pruning drops it (<= 3 in N: one
// fixed guess is right 1 in N; the margin allows a guess that varies with the small talk).
BOOST_AUTO_TEST_CASE(recall_is_right_in_the_window_and_chance_once_pruned) {
  int kept = 0, right_kept = 0, dropped = 0, right_dropped = 0;
  for (const auto& c : experiment()) kept += c.kept, right_kept += c.right_kept, dropped += c.dropped, right_dropped += c.right_dropped;
  BOOST_TEST_MESSAGE("name kept: " << right_kept << "/" << kept << " right; name pruned: " << right_dropped << "/" << dropped);
  BOOST_TEST_REQUIRE(kept >= 30);
  BOOST_TEST_REQUIRE(dropped >= 20);
  BOOST_TEST(right_kept >= 0.9 * kept, right_kept << " of " << kept);
  BOOST_TEST(right_dropped <= 3.0 * dropped / static_cast<double>(kNames.size()), right_dropped << " of " << dropped);
}

// docs/attention.md shows the figures chat gives now; regenerate them with GLASSBOX_UPDATE_DOCS=1
// (tools/update-toy-figures.sh).
BOOST_AUTO_TEST_CASE(doc_figures_are_current) {
  const std::string wrong = gbtest::check_doc_block(kDoc, kBegin, kEnd, figures(), "GLASSBOX_UPDATE_DOCS=1 ctest -R test_recall");
  BOOST_TEST(wrong.empty(), wrong);
}

BOOST_AUTO_TEST_SUITE_END()
