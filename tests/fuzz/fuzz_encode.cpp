// libFuzzer entry point: arbitrary bytes as text, encoded and decoded with real vocabularies (targets.hpp).
#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) { return gbfuzz::encode(data, size); }
