// libFuzzer entry point: GBNF text through the grammar parser and the recognizer's walk (grammar_targets.hpp).
#include "grammar_targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) { return gbfuzz::grammar(data, size); }
