// `glassbox serve`: its command line (serve.cpp is the server).
#include "commands.hpp"
#include "glassbox/error.hpp"
#include "glassbox/speculative.hpp"
#include "serve.hpp"
#include "session.hpp"

#include <filesystem>

namespace glassbox::cli {

void add_serve_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("serve", "serve the llama.cpp and OpenAI HTTP APIs, with a trace per request and a class-room page");
  auto o = std::make_shared<ServeOptions>();
  auto paths = std::make_shared<std::vector<std::string>>();
  cmd->add_option("--model,-m", o->model, "model file (llama2.c checkpoint or GGUF), or toy: the embedded toy model")->required();
  cmd->add_option("--tokenizer,-t", o->tokenizer, "tokenizer file (llama2.c checkpoints; a GGUF carries its own)");
  cmd->add_option("--host", o->host, "address to listen on")->capture_default_str();
  cmd->add_option("--port", o->port, "port to listen on (0: any free one, printed on stderr)")->capture_default_str();
  cmd->add_option("--threads", o->threads, "threads for the matrix products (0: one per physical core)")->capture_default_str();
  cmd->add_option("--parallel,--np", o->parallel, "requests that decode at once, each with its own KV store (1..256)")->capture_default_str();
  cmd->add_flag("!--no-batch", o->batch,
                "decode each slot on its own (default with --parallel > 1: the slots' decode steps share one forward pass, "
                "the weights read once per step for all of them)");
  cmd->add_option("--prefix-cache", o->prefix_cache_mib,
                  "MiB of recent prompts' K/V kept so that a prompt beginning the same way (a class's shared system prompt) "
                  "copies it instead of prefilling it again; with continuous batching (0: off)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--queue", o->queue, "requests that wait for a slot; beyond them: 503 (0..4096)")->capture_default_str();
  cmd->add_option("--api-key", o->api_key, "require 'Authorization: Bearer KEY' on every endpoint but / and /health");
  cmd->add_option("--trace-dir", o->trace_dir, "keep every request's trace here (default: a temporary folder, the newest --trace-keep kept)");
  cmd->add_option("--trace-keep", o->trace_keep, "traces kept without --trace-dir")->capture_default_str()->check(CLI::Range(1, 1000000));
  cmd->add_option("--context,-c", o->context, "positions per request (0: the model's, capped at 4096)")->capture_default_str();
  cmd->add_option("--max-predict", o->max_predict, "largest n_predict / max_tokens a request may ask for")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--max-probs", o->max_probs, "largest n_probs / top_logprobs a request may ask for")->capture_default_str()->check(CLI::Range(0, 100000));
  cmd->add_option("--max-body", o->max_body, "largest request body in bytes (413 beyond)")->capture_default_str()->check(CLI::Range(1024, 1 << 30));
  cmd->add_option("--request-timeout", o->request_timeout, "seconds a client has to send a request's header and body; past it the connection is closed")->capture_default_str()->check(CLI::Range(1, 3600));
  cmd->add_option("--client-connections", o->client_connections, "connections of one client address still sending a request; beyond, its oldest is closed")->capture_default_str()->check(CLI::Range(1, 128));
  cmd->add_option("--cors", o->cors, "allow pages from this origin (e.g. http://localhost:3000, or *) to call the API (off by default)");
  cmd->add_option("--pace", o->pace_ms, "pause in ms before each streamed token (class-room demonstrations)")->capture_default_str()->check(CLI::Range(0.0, 60000.0));
  cmd->add_option("--alias", o->alias, "the model's name in responses (default: the file's name)");
  cmd->add_option("--plugin-path", *paths, "more folders of plugin modules");
  // The same long names as run's and chat's (docs/options.md); requests with a draft decode alone, not in the batch.
  cmd->add_option("--draft-model", o->draft_model,
                  "speculative decoding for every request: a small model with the same vocabulary drafts tokens the model verifies "
                  "in one forward (docs/speculative.md)");
  cmd->add_option("--draft-tokenizer", o->draft_tokenizer, "the draft model's tokenizer file (default: the one inside a GGUF draft, else --tokenizer's)");
  cmd->add_option("--draft-tokens", o->draft_tokens, "tokens the draft proposes per round (with --draft-model)")
      ->capture_default_str()
      ->check(CLI::Range(1, kMaxDraftTokens));
  cmd->callback([o, paths, cmd] {
    o->plugin_path.assign(paths->begin(), paths->end());
    if (o->draft_model.empty() && (cmd->count("--draft-tokens") || cmd->count("--draft-tokenizer")))
      throw ConfigError(std::string(cmd->count("--draft-tokens") ? "--draft-tokens" : "--draft-tokenizer") +
                        " sets up speculative decoding: name the draft with --draft-model");
    resolve_toy_model(o->model, o->tokenizer, "--model");
    run_server(*o);
  });
}

}  // namespace glassbox::cli
