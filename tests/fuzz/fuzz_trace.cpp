// libFuzzer entry point for gbfuzz::trace (targets.hpp).
#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) { return gbfuzz::trace(data, size); }
