// The documentation's commands run as written: every ```sh block of README.md and docs/tour.md, in order, in a
// fresh folder with build/bin on PATH; an ```output block right after one must be what it prints now.
//
// Conventions (also at the top of README.md): a block mentioning ../shared (or with "# needs ../shared") is
// skipped without ../shared; "<!-- readme-test: skip REASON -->" just before a fence skips that block;
// ```output blocks are compared after masking the numbers of "[glassbox] ..." timing lines, and
// ```output-varies blocks (timings) are only refreshed. GLASSBOX_UPDATE_DOCS=1 rewrites the output blocks
// (tools/update-tour.sh). The blocks run with the AVX2 kernel set where the CPU has it (kernels_env).
#define BOOST_TEST_MODULE readme
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <sys/wait.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "glassbox/registry.hpp"
#include "glassbox/kernels.hpp"
#include "support.hpp"

namespace fs = std::filesystem;

namespace {

const fs::path kSource = GLASSBOX_SOURCE_DIR;

struct Block {
  std::string info;                // the fence's info string: "sh", "output", ...
  std::size_t first = 0, last = 0;  // line indexes of the opening and closing fences
  std::string body;
  std::string skip;                // why it is not run ("" : it runs)
};

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string l;
  while (std::getline(in, l)) out.push_back(l);
  return out;
}

// Fenced blocks, outside HTML comments, with a preceding "<!-- readme-test: skip ... -->".
std::vector<Block> blocks(const std::vector<std::string>& lines, const std::string& doc) {
  std::vector<Block> out;
  bool in_comment = false;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string& l = lines[i];
    if (in_comment) {
      if (l.find("-->") != std::string::npos) in_comment = false;
      continue;
    }
    if (l.rfind("<!--", 0) == 0 && l.find("-->") == std::string::npos) {
      in_comment = true;
      continue;
    }
    if (l.rfind("```", 0) != 0) continue;
    Block b;
    b.info = l.substr(3);
    b.first = i;
    std::size_t j = i + 1;
    while (j < lines.size() && lines[j].rfind("```", 0) != 0) b.body += lines[j++] + "\n";
    BOOST_TEST_REQUIRE(j < lines.size(), doc << ":" << i + 1 << ": unclosed code block");
    b.last = j;
    const std::string prev = i > 0 ? lines[i - 1] : "";
    const std::string tag = "<!-- readme-test: skip";
    if (prev.rfind(tag, 0) == 0) b.skip = prev.substr(tag.size(), prev.find("-->") - tag.size());
    out.push_back(b);
    i = j;
  }
  return out;
}

bool is_shell(const std::string& info) { return info == "sh" || info == "bash" || info == "shell"; }

// The numbers in "[glassbox] ..." lines (timings, seeds of unseeded runs) become "#".
std::string mask(const std::string& text) {
  std::string out;
  for (const auto& l : lines_of(text)) {
    if (l.rfind("[glassbox]", 0) == 0) {
      std::string m;
      for (std::size_t i = 0; i < l.size(); ++i) {
        if (std::isdigit(static_cast<unsigned char>(l[i]))) {
          while (i + 1 < l.size() && (std::isdigit(static_cast<unsigned char>(l[i + 1])) || l[i + 1] == '.')) ++i;
          m += '#';
        } else {
          m += l[i];
        }
      }
      out += m + "\n";
    } else {
      out += l + "\n";
    }
  }
  return out;
}

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// The recorded outputs hold numbers (logprobs, probabilities) whose last digits depend on the kernel set's
// summation order (docs/performance.md): the blocks run with the AVX2 set wherever the CPU has it (every
// AVX-512 machine does), so that a block recorded on one machine reads the same on another. Set by hand,
// GLASSBOX_KERNELS wins.
std::string kernels_env() {
  if (std::getenv("GLASSBOX_KERNELS")) return "";
  const auto sets = glassbox::kernels::kernel_sets();
  return std::find(sets.begin(), sets.end(), "avx2") != sets.end() ? "GLASSBOX_KERNELS=avx2 " : "";
}

void run_doc(const std::string& rel) {
  const fs::path doc = kSource / rel;
  auto lines = lines_of(gbtest::read_file(doc));
  const auto bs = blocks(lines, rel);
  // One folder for the whole document, beside a "shared" link: ../shared resolves as from the repository root.
  const fs::path top = gbtest::temp_dir("readme-" + fs::path(rel).stem().string());
  const fs::path work = top / "work";
  fs::create_directories(work);
  const auto shared = gbtest::shared_dir();
  if (shared) fs::create_directory_symlink(fs::absolute(*shared), top / "shared");
  const fs::path bin = fs::path(GLASSBOX_BIN).parent_path();
  const bool update = std::getenv("GLASSBOX_UPDATE_DOCS") != nullptr;
  std::vector<std::pair<std::size_t, std::string>> rewrites;  // output block index -> new text
  int ran = 0;
  for (std::size_t k = 0; k < bs.size(); ++k) {
    const Block& b = bs[k];
    if (!is_shell(b.info)) continue;
    const std::string where = rel + ":" + std::to_string(b.first + 1);
    if (!b.skip.empty()) {
      BOOST_TEST_MESSAGE(where << ": skipped:" << b.skip);
      continue;
    }
    if (!shared && b.body.find("../shared") != std::string::npos) {
      BOOST_TEST_MESSAGE(where << ": skipped: needs ../shared, which is absent");
      continue;
    }
    gbtest::write_file(top / "block.sh", b.body);
    const std::string cmd = "cd " + quote(work.string()) + " && " + kernels_env() + "PATH=" + quote(bin.string()) + ":\"$PATH\" timeout 300 sh -e " +
                            quote((top / "block.sh").string()) + " </dev/null >" + quote((top / "out").string()) + " 2>&1";
    const int status = std::system(cmd.c_str());
    const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
    const std::string out = gbtest::read_file(top / "out");
    BOOST_TEST(rc == 0, where << ": the block failed (exit " << rc << "):\n" << b.body << "--- output:\n" << out.substr(0, 3000));
    ++ran;
    // The output block right after it (blank lines between are allowed).
    if (k + 1 < bs.size() && (bs[k + 1].info == "output" || bs[k + 1].info == "output-varies")) {
      bool adjacent = true;
      for (std::size_t i = b.last + 1; i < bs[k + 1].first; ++i) adjacent &= lines[i].empty();
      if (!adjacent) continue;
      if (update) rewrites.emplace_back(k + 1, out);
      else if (bs[k + 1].info == "output")
        BOOST_TEST(mask(out) == mask(bs[k + 1].body),
                   where << ": the output differs from the recorded one (tools/update-tour.sh rewrites it):\n--- now:\n"
                         << out << "--- recorded:\n" << bs[k + 1].body);
    }
  }
  BOOST_TEST_MESSAGE(rel << ": " << ran << " blocks run");
  if (update && !rewrites.empty()) {
    for (auto it = rewrites.rbegin(); it != rewrites.rend(); ++it) {
      const Block& o = bs[it->first];
      auto body = lines_of(it->second);
      lines.erase(lines.begin() + static_cast<std::ptrdiff_t>(o.first + 1), lines.begin() + static_cast<std::ptrdiff_t>(o.last));
      lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(o.first + 1), body.begin(), body.end());
    }
    std::string text;
    for (const auto& l : lines) text += l + "\n";
    gbtest::write_file(doc, text);
    BOOST_TEST_MESSAGE(rel << ": " << rewrites.size() << " output blocks rewritten");
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(readme_commands_run_as_written) { run_doc("README.md"); }

// The README's plugin table has a row for every plugin the built-in modules register: kind, name, module.
BOOST_AUTO_TEST_CASE(readme_plugin_table_lists_every_plugin_and_module) {
  const std::string readme = gbtest::read_file(kSource / "README.md");
  glassbox::Registry reg;
  reg.load_directory(glassbox::Registry::builtin_dir());
  BOOST_TEST_REQUIRE(reg.rejections().empty());
  const auto entries = reg.list();
  BOOST_TEST_REQUIRE(entries.size() >= 20u);
  for (const auto& e : entries) {
    const std::string row = "| " + glassbox::kind_name(e.kind) + " | `" + e.info.name + "` | `" + e.module_name + "` |";
    BOOST_TEST(readme.find(row) != std::string::npos, "README.md's plugin table lacks " << row);
  }
}
BOOST_AUTO_TEST_CASE(tour_commands_run_and_print_what_it_shows) { run_doc("docs/tour.md"); }

// The extractor itself: fences inside HTML comments are not blocks, a skip tag is read, output blocks pair up.
BOOST_AUTO_TEST_CASE(extractor_reads_the_conventions) {
  const auto bs = blocks(lines_of("<!--\n```sh\nfalse\n```\n-->\n<!-- readme-test: skip needs a terminal -->\n```sh\nx\n```\n"
                                  "```sh\necho hi\n```\n\n```output\nhi\n```\n"),
                         "t.md");
  BOOST_TEST_REQUIRE(bs.size() == 3u);
  BOOST_TEST(bs[0].skip == " needs a terminal ");
  BOOST_TEST(bs[1].body == "echo hi\n");
  BOOST_TEST(bs[2].info == "output");
  BOOST_TEST(mask("[glassbox] 4 tokens, ttft 0.21 ms\nsunny 0.44\n") == "[glassbox] # tokens, ttft # ms\nsunny 0.44\n");
}
