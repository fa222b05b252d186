// `glassbox serve`: its command line (serve.cpp is the server).
#include "commands.hpp"
#include "run_options.hpp"
#include "glassbox/error.hpp"
#include "glassbox/speculative.hpp"
#include "serve.hpp"
#include "session.hpp"

#include <algorithm>
#include <filesystem>

namespace glassbox::cli {

void add_serve_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("serve", "serve the llama.cpp and OpenAI HTTP APIs, with a trace per request and a class-room page");
  auto o = std::make_shared<ServeOptions>();
  // The options it shares with run and chat (model, tokenizer, context, threads, plugin path, pace, the draft,
  // --config) come from the one option table: the same names, checks and help (docs/options.md).
  auto shared = std::make_shared<RunOptionTableBinder>(cmd, kServe);
  cmd->add_option("--host", o->host, "address to listen on")->capture_default_str();
  cmd->add_option("--port", o->port, "port to listen on (0: any free one, printed on stderr)")->capture_default_str();
  cmd->add_option("--parallel,--np", o->parallel, "requests that decode at once, each with its own KV store (1..256)")->capture_default_str();
  cmd->add_flag("!--no-batch", o->batch,
                "decode each slot on its own (default with --parallel > 1: the slots' decode steps share one forward pass, "
                "the weights read once per step for all of them)");
  cmd->add_option("--prefix-cache", o->prefix_cache_mib,
                  "MiB of recent prompts' K/V kept so that a prompt beginning the same way (a class's shared system prompt) "
                  "copies it instead of prefilling it again; with continuous batching (0: off)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--kv-pool", o->kv_pool_mib,
                  "MiB of K/V blocks shared by every request when --attention is paged; a request waits in the queue until "
                  "its blocks fit (0: as many blocks as --parallel contexts need)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--queue", o->queue, "requests that wait for a slot; beyond them: 503 (0..4096)")->capture_default_str();
  cmd->add_option("--api-key", o->api_key, "require 'Authorization: Bearer KEY' on every endpoint but / and /health");
  cmd->add_option("--trace-dir", o->trace_dir, "keep every request's trace here (default: a temporary folder, the newest --trace-keep kept)");
  cmd->add_option("--trace-keep", o->trace_keep, "traces kept without --trace-dir")->capture_default_str()->check(CLI::Range(1, 1000000));
  cmd->add_option("--max-predict", o->max_predict, "largest n_predict / max_tokens a request may ask for")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--max-probs", o->max_probs, "largest n_probs / top_logprobs a request may ask for")->capture_default_str()->check(CLI::Range(0, 100000));
  cmd->add_option("--max-body", o->max_body, "largest request body in bytes (413 beyond)")->capture_default_str()->check(CLI::Range(1024, 1 << 30));
  cmd->add_option("--request-timeout", o->request_timeout, "seconds a client has to send a request's header and body; past it the connection is closed")->capture_default_str()->check(CLI::Range(1, 3600));
  cmd->add_option("--client-connections", o->client_connections, "connections of one client address still sending a request; beyond, its oldest is closed")->capture_default_str()->check(CLI::Range(1, 128));
  cmd->add_option("--cors", o->cors, "allow pages from this origin (e.g. http://localhost:3000, or *) to call the API (off by default)");
  cmd->add_option("--alias", o->alias, "the model's name in responses (default: the file's name)");
  cmd->callback([o, shared] {
    const RunOptions ro = shared->merge();
    // A tokenizer file only: serve chooses the tokenizer plugin from the model, as run does by default.
    if (!ro.tokenizer.name.empty() || std::any_of(ro.tokenizer.params.begin(), ro.tokenizer.params.end(), [](const auto& p) { return p.first != "path"; }))
      throw ConfigError("--tokenizer " + ro.tokenizer.to_string() + ": serve takes a tokenizer file (a path), not a plugin name or parameters");
    o->model = ro.model;
    for (const auto& [key, value] : ro.tokenizer.params) o->tokenizer = value;  // (only "path" is left)
    o->threads = ro.threads;
    o->context = ro.context;
    o->attention = ro.attention;
    o->pace_ms = ro.pace_ms;
    o->plugin_path = ro.plugin_path;
    o->draft_model = ro.draft_model;
    o->draft_tokenizer = ro.draft_tokenizer;
    o->draft_tokens = ro.draft_tokens;
    if (o->draft_model.empty() && (shared->given("draft_tokens") || shared->given("draft_tokenizer")))
      throw ConfigError(std::string(shared->given("draft_tokens") ? "--draft-tokens" : "--draft-tokenizer") +
                        " sets up speculative decoding: name the draft with --draft-model");
    if (o->model.empty()) {
      // No --model: the embedded toy, as run and chat.
      const auto def = default_model();
      if (!def) throw ConfigError("no --model given and no embedded default model installed next to the binary");
      o->model = def->first.string();
      if (o->tokenizer.empty()) o->tokenizer = def->second.string();
    }
    resolve_toy_model(o->model, o->tokenizer, "--model");
    run_server(*o);
  });
}

}  // namespace glassbox::cli
