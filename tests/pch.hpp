// The headers nearly every test file includes, parsed once per build as a precompiled header
// (tests/CMakeLists.txt, GLASSBOX_TEST_PCH): Boost.Test and its data-driven cases, nlohmann-json, the
// standard headers the suites use. A test file still includes what it uses; this only saves the parsing.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>
