// libFuzzer entry point: a llama2.c tokenizer.bin (targets.hpp).
#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return gbfuzz::tokenizer(data, size, "llama2c", "tokenizer.bin");
}
