// libFuzzer entry point: arbitrary bytes as text, encoded and decoded with real vocabularies (targets.hpp).
#include "targets.hpp"

// The vocabularies load once, before the first input: a Llama 3 tokenizer.json takes seconds under ASan,
// which counted against the first input's -timeout when it was loaded lazily.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  gbfuzz::vocabs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) { return gbfuzz::encode(data, size); }
