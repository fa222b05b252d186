// `glassbox tokenize`: text -> ids and pieces, as the model would see it.
#include <iostream>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "glassbox/error.hpp"
#include "glassbox/traces/writer.hpp"
#include "session.hpp"

namespace glassbox::cli {

void add_tokenize_command(CLI::App& app) {
  struct Opts {
    std::string tokenizer, plugin = "llama2c", text;
    std::vector<std::string> plugin_path;
    bool json = false, no_bos = false, eos = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("tokenize", "encode TEXT and print its token ids and pieces");
  cmd->add_option("--tokenizer,-t", o->tokenizer, "tokenizer file or folder (default: the embedded model's)");
  cmd->add_option("--tokenizer-plugin", o->plugin, "tokenizer plugin: llama2c (SentencePiece) or bpe (byte-level BPE; default: llama2c)");
  cmd->add_option("--plugin-path", o->plugin_path, "extra folder of plugin modules");
  cmd->add_option("text", o->text, "the text to encode")->required();
  cmd->add_flag("--json", o->json, "print {\"ids\":[...],\"pieces\":[...]}");
  cmd->add_flag("--no-bos", o->no_bos, "do not prepend BOS (prepended only when the vocabulary asks for it)");
  cmd->add_flag("--eos", o->eos, "append EOS");
  cmd->callback([o] {
    Registry reg;
    std::vector<std::filesystem::path> extra(o->plugin_path.begin(), o->plugin_path.end());
    reg.load_default(extra);
    for (const auto& r : reg.rejections()) warn("module rejected: " + r.to_string());
    std::string path = o->tokenizer;
    if (path.empty()) {
      auto def = default_model();
      if (!def) throw ConfigError("no --tokenizer given and no embedded default model installed");
      path = def->second.string();
    }
    auto tok = reg.make_tokenizer(PluginSpec{o->plugin, {{"path", path}}});
    // BOS only where the vocabulary asks for it (SentencePiece does, GPT-2 does not).
    const auto ids = tok->encode(o->text, !o->no_bos && tok->add_bos(), o->eos);
    std::vector<std::string> pieces;
    for (auto id : ids) pieces.emplace_back(tok->piece(id));
    if (o->json) {
      std::cout << traces::dump(nlohmann::json{{"ids", ids}, {"pieces", pieces}}) << "\n";
      return;
    }
    for (std::size_t i = 0; i < ids.size(); ++i)
      std::cout << ids[i] << "\t" << traces::dump(nlohmann::json(pieces[i])) << "\n";
  });
}

}  // namespace glassbox::cli
