// The Boost.Test entry point of every test executable when the test headers are precompiled
// (GLASSBOX_TEST_PCH, tests/CMakeLists.txt). A test file's `#define BOOST_TEST_MODULE name` makes Boost.Test
// define main() only if it comes before the first include of unit_test.hpp, and the precompiled header
// includes it first; so main() lives here, and names the module after the executable (test_NAME -> NAME),
// as each file's BOOST_TEST_MODULE does.
#include <boost/test/unit_test.hpp>

#include <string>

namespace {
std::string module_name = "glassbox";

bool init_module() {
  boost::unit_test::framework::master_test_suite().p_name.value = module_name;
  return true;
}
}  // namespace

int main(int argc, char* argv[]) {
  if (argc > 0 && argv[0]) {
    std::string name = argv[0];
    name = name.substr(name.find_last_of('/') + 1);  // npos + 1 == 0: no folder
    if (name.rfind("test_", 0) == 0) name = name.substr(5);
    if (!name.empty()) module_name = name;
  }
  return boost::unit_test::unit_test_main(&init_module, argc, argv);
}
