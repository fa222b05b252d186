// `glassbox serve`: llama.cpp's and OpenAI's HTTP APIs over one loaded model (cpp-httplib), with a
// glassbox.trace/2 trace per request. docs/serve.md describes the endpoints and fields.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "glassbox/registry.hpp"

namespace glassbox::cli {

struct ServeOptions {
  std::string model;
  std::string tokenizer;          // a tokenizer file (llama2.c checkpoints); empty: the model's own
  std::string host = "127.0.0.1";
  int port = 8080;                // 0: any free port (the one bound is printed)
  int threads = 0;                // matrix-product threads (0: one per physical core)
  int parallel = 1;               // requests decoding at once, each with its own KV store
  bool batch = true;              // with parallel > 1: the slots' decode steps share one forward pass (continuous batching)
  int prefix_cache_mib = 256;     // batched: K/V of recent prompts kept for prompts that begin the same way (0: none)
  PluginSpec attention{"kv-cache", {}};  // every request's attention module (--attention)
  // A paged attention module's blocks come from one pool all requests share, of this many MiB (0: as many blocks
  // as --parallel contexts need; docs/serve.md "Shared KV pool"); a request is admitted when its blocks fit.
  int kv_pool_mib = 0;
  int queue = 16;                 // requests waiting for a slot before 503
  std::string api_key;            // non-empty: every endpoint but /health and / needs Authorization: Bearer KEY
  std::string trace_dir;          // where traces are kept (empty: a private temporary folder, newest trace_keep kept)
  int trace_keep = 256;
  int context = 0;                // positions per request (0: the model's, capped at 4096)
  int max_predict = 4096;         // n_predict / max_tokens above this: 400
  int max_probs = 100;            // n_probs / top_logprobs above this: 400
  std::size_t max_body = 1 << 20; // request bodies above this: 413
  int request_timeout = 15;        // seconds for a request's header and body, from its first byte
  int client_connections = 32;    // connections of one client address still sending a request; beyond, the oldest closes
  std::string cors;               // non-empty: Access-Control-Allow-Origin on every answer, OPTIONS preflights answered
  double pace_ms = 0;             // pause before each streamed token (class-room demonstrations)
  std::string alias;              // the model's name in responses (default: the file's name)
  std::vector<std::filesystem::path> plugin_path;
  // Speculative decoding (docs/speculative.md): a draft with the model's vocabulary proposes draft_tokens per
  // round for every request whose chain has a fixed distribution (others decode plainly, with a warning).
  std::string draft_model, draft_tokenizer;
  int draft_tokens = 4;
};

// Binds, loads the model (GET /health says 503 meanwhile), serves until SIGINT/SIGTERM, then cancels the
// requests in flight (their traces end in an interrupted line) and returns. Throws glassbox errors for
// options and a model that cannot be used.
void run_server(const ServeOptions& opt);

// For the fuzz target over the server's request reading (tests/fuzz/fuzz_serve_request.cpp): a server
// over `opt`'s model that does not listen. feed() runs one connection's bytes through the server's
// connection loop, httplib's request parser, the API key and body checks and the endpoints' field
// parsing (a generation request stops where it would wait for a slot) and returns what it answered.
class RequestFuzzer {
 public:
  explicit RequestFuzzer(const ServeOptions& opt);
  ~RequestFuzzer();
  std::string feed(std::string_view bytes);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace glassbox::cli
