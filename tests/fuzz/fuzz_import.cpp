// libFuzzer entry point: another engine's capture (llama.cpp, OpenAI, vLLM, TGI, .npy, .kld) through every
// `trace import` dialect (cli_targets.hpp).
#include "cli_targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) { return gbfuzz::import(data, size); }
