// libFuzzer entry point: one connection's bytes through `glassbox serve`'s request reading (serve_target.hpp).
#include "serve_target.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) { return gbfuzz::serve_request(data, size); }
