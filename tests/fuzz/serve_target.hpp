// The server's request reading as a fuzz target (docs/reliability.md): one connection's bytes through
// `glassbox serve`'s connection loop, httplib's request parser, the body and key checks and the endpoints'
// field parsing, over the toy model (models/toy), stopping where a generation would start decoding.
// Shared by tests/fuzz/fuzz_serve_request.cpp and test_fuzz_regressions.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "../../cli/serve.hpp"

namespace gbfuzz {

inline int serve_request(const std::uint8_t* data, std::size_t size) {
  static glassbox::cli::RequestFuzzer* fuzzer = [] {
    glassbox::cli::ServeOptions o;
    o.model = std::string(GLASSBOX_SOURCE_DIR) + "/models/toy/toy.bin";
    o.tokenizer = std::string(GLASSBOX_SOURCE_DIR) + "/models/toy/toy-tok.bin";
    o.max_body = 65536;
    o.cors = "*";
    return new glassbox::cli::RequestFuzzer(o);  // never destroyed: its modules stay loaded until exit
  }();
  const std::string answer = fuzzer->feed(std::string_view(reinterpret_cast<const char*>(data), size));
  // Every answer is HTTP with a bounded body: an error never echoes the request.
  if (!answer.empty() && answer.rfind("HTTP/1.1 ", 0) != 0) std::abort();
  return 0;
}

}  // namespace gbfuzz
