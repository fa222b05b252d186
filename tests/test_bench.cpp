// `glassbox bench` on the embedded toy model (lists, JSON/CSV, errors), and the kernel set and
// thread count recorded in the trace header.
#define BOOST_TEST_MODULE bench
#include <boost/test/unit_test.hpp>

#include <sstream>

#include "glassbox/kernels.hpp"
#include "support.hpp"

using gbtest::run_cli;
using nlohmann::json;

BOOST_AUTO_TEST_CASE(defaults_fit_the_embedded_model) {
  auto r = run_cli({"bench", "-r", "1", "--no-roofline", "--json"});
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  const json j = json::parse(r.out);
  BOOST_TEST(j["kernels"].get<std::string>() == std::string(glassbox::kernels::kernel_set()));
  BOOST_TEST(j["peak_rss_mib"].get<double>() > 0);
  BOOST_TEST_REQUIRE(j["results"].size() == 2u);
  BOOST_TEST(j["results"][0]["test"] == "pp128");  // the toy model's context is 128: the prompt fits
  BOOST_TEST(j["results"][1]["test"] == "tg64");   // 128 + BOS does not: generation shrinks to half
  for (const auto& e : j["results"]) {
    BOOST_TEST(e["tok_s"].get<double>() > 0);
    BOOST_TEST(!e.contains("roofline_fraction"));
  }
  BOOST_TEST(j["results"][0].contains("ttft_ms"));
}

BOOST_AUTO_TEST_CASE(lists_make_one_row_per_test_and_thread_count) {
  auto r = run_cli({"bench", "-r", "2", "-p", "16,32", "-n", "8", "--threads", "1,2", "--csv"});
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  std::istringstream in(r.out);
  std::string line;
  std::vector<std::string> rows;
  while (std::getline(in, line)) rows.push_back(line);
  BOOST_TEST_REQUIRE(rows.size() == 7u);  // header + (pp16, pp32, tg8) × 2 thread counts
  BOOST_TEST(rows[0].rfind("model,kernels,test,threads", 0) == 0);
  BOOST_TEST(rows[1].find(",pp16,1,16,") != std::string::npos, rows[1]);
  BOOST_TEST(rows[6].find(",tg8,2,8,") != std::string::npos, rows[6]);
  // With the roofline measured, every row has its fraction.
  for (std::size_t i = 1; i < rows.size(); ++i) {
    std::vector<std::string> fields;
    std::istringstream f(rows[i]);
    for (std::string x; std::getline(f, x, ',');) fields.push_back(x);
    if (rows[i].back() == ',') fields.emplace_back();  // (getline gives no empty last field)
    BOOST_TEST_REQUIRE(fields.size() == 13u, rows[i]);
    BOOST_TEST(std::stod(fields[10]) > 0, rows[i]);  // roofline_fraction
    // read_roofline_fraction: decode rows only (prefill's bound is the FMA peak)
    if (fields[2].rfind("tg", 0) == 0) BOOST_TEST(std::stod(fields[12]) > 0, rows[i]);
    else BOOST_TEST(fields[12].empty(), rows[i]);
  }
}

// Both bandwidths (#32): the triad, and a read-only stream, which decode's reads can reach and the
// triad (which also writes) may understate; each decode row a fraction of both.
BOOST_AUTO_TEST_CASE(json_reports_the_triad_and_the_read_bandwidth) {
  auto r = run_cli({"bench", "-r", "1", "-p", "16", "-n", "8", "--threads", "1", "--json"});
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  const json j = json::parse(r.out);
  const json& m = j["machine"]["1"];
  BOOST_TEST(m["triad_gb_s"].get<double>() > 0);
  BOOST_TEST(m["read_gb_s"].get<double>() > 0);
  BOOST_TEST(m["fma_gflop_s"].get<double>() > 0);
  BOOST_TEST_REQUIRE(j["results"].size() == 2u);
  const json& tg = j["results"][1];
  BOOST_TEST(tg["test"] == "tg8");
  // The same bytes per second over two bandwidths: the fractions' ratio is the bandwidths' inverse ratio.
  BOOST_TEST(tg["read_roofline_fraction"].get<double>() * m["read_gb_s"].get<double>() ==
                 tg["roofline_fraction"].get<double>() * m["triad_gb_s"].get<double>(),
             boost::test_tools::tolerance(1e-9));
  BOOST_TEST(!j["results"][0].contains("read_roofline_fraction"));  // pp16: bound by the FMA peak
}

BOOST_AUTO_TEST_CASE(bad_lists_and_lengths_are_refused) {
  auto r = run_cli({"bench", "-p", "16,x"});
  BOOST_TEST(r.rc == 2);
  BOOST_TEST(r.err.find("--prompt-tokens: 'x' is not a positive integer") != std::string::npos, r.err);
  r = run_cli({"bench", "-p", "200"});
  BOOST_TEST(r.rc == 2);
  BOOST_TEST(r.err.find("--prompt-tokens 200 exceeds the run's context of 128") != std::string::npos, r.err);
  r = run_cli({"bench", "--threads", "0"});
  BOOST_TEST(r.rc == 2);
}

BOOST_AUTO_TEST_CASE(the_trace_header_names_the_kernel_set_and_threads) {
  const auto dir = gbtest::temp_dir("bench-trace");
  auto r = run_cli({"run", "-n", "2", "-s", "greedy", "--threads", "2", "--trace", (dir / "t.jsonl").string()});
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  const auto lines = gbtest::read_jsonl(dir / "t.jsonl");
  BOOST_TEST_REQUIRE(!lines.empty());
  BOOST_TEST(lines[0]["kernels"].get<std::string>() == std::string(glassbox::kernels::kernel_set()));
  BOOST_TEST(lines[0]["threads"].get<int>() == 2);
  // The same run pinned to the baseline kernels says so, and the tokens agree (greedy, toy model).
  auto b = run_cli({"run", "-n", "2", "-s", "greedy", "--threads", "1", "--trace", (dir / "b.jsonl").string()}, "GLASSBOX_KERNELS=sse4.2");
  BOOST_TEST_REQUIRE(b.rc == 0, b.err);
  BOOST_TEST(gbtest::read_jsonl(dir / "b.jsonl")[0]["kernels"] == "sse4.2");
  BOOST_TEST(b.out == r.out);
}
