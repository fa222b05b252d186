// libFuzzer entry point: a byte-level BPE tokenizer.json (targets.hpp).
#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return gbfuzz::tokenizer(data, size, "bpe", "tokenizer.json");
}
