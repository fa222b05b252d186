// libFuzzer entry point: a `compare --shard` result file through `compare merge` (cli_targets.hpp).
#include "cli_targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) { return gbfuzz::shard(data, size); }
