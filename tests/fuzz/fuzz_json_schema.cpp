// libFuzzer entry point: a JSON schema through the converter, the grammar parser and the walk (grammar_targets.hpp).
#include "grammar_targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) { return gbfuzz::json_schema(data, size); }
