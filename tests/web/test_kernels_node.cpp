// tests/test_kernels.cpp compiled for WebAssembly and run under node (tests/web/test-web-node.sh): every kernel
// set of the web build (simd128, scalar) against the scalar twins. Boost.Test comes in as its header-only
// variant (there is no Boost library for wasm), which supplies main; the thread tests run with one thread.
#define BOOST_TEST_MODULE kernels
#define BOOST_TEST_DISABLE_ALT_STACK  // emscripten has no sigaltstack
#include <boost/test/included/unit_test.hpp>

#include "../test_kernels.cpp"
