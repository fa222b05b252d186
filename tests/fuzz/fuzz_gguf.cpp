// libFuzzer entry point for gbfuzz::gguf (targets.hpp).
#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) { return gbfuzz::gguf(data, size); }
