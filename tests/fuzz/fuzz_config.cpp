// libFuzzer entry point: a `run --config` YAML file through option parsing and plugin construction (config_target.hpp).
#include "config_target.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) { return gbfuzz::config(data, size); }
