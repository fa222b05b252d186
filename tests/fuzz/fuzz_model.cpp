// libFuzzer entry point for gbfuzz::model (targets.hpp).
#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) { return gbfuzz::model(data, size); }
