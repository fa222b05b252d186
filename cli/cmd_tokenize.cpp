// `glassbox tokenize`: text -> ids and pieces, as the model would see it.
#include <iostream>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "glassbox/error.hpp"
#include "glassbox/model/model_source.hpp"
#include "glassbox/run_spec.hpp"
#include "glassbox/traces/writer.hpp"
#include "session.hpp"
#include "streaming.hpp"

namespace glassbox::cli {

void add_tokenize_command(CLI::App& app) {
  struct Opts {
    std::string tokenizer, plugin, model, text;
    std::vector<std::string> plugin_path;
    bool json = false, no_bos = false, eos = false, special = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("tokenize", "encode TEXT and print its token ids and pieces");
  cmd->add_option("--tokenizer,-t", o->tokenizer, "tokenizer file or folder (default: the embedded model's)");
  cmd->add_option("--model,-m", o->model, "a GGUF model whose own vocabulary to use (instead of --tokenizer)");
  cmd->add_option("--tokenizer-plugin", o->plugin,
                  "tokenizer plugin: llama2c (SentencePiece) or bpe (byte-level BPE; default: llama2c, or the GGUF's family)");
  cmd->add_option("--plugin-path", o->plugin_path, "extra folder of plugin modules");
  cmd->add_option("text", o->text, "the text to encode")->required();
  cmd->add_flag("--json", o->json, "print {\"ids\":[...],\"pieces\":[...],\"special\":[...]} (a control token's piece is its name, e.g. </s>)");
  cmd->add_flag("--no-bos", o->no_bos, "do not prepend BOS (prepended only when the vocabulary asks for it)");
  cmd->add_flag("--eos", o->eos, "append EOS");
  cmd->add_flag("--parse-special", o->special,
                "take control tokens spelled in the text (<s>, <|im_start|>, ...) as their ids, as a chat template's markers are");
  cmd->callback([o] {
    Registry reg;
    std::vector<std::filesystem::path> extra(o->plugin_path.begin(), o->plugin_path.end());
    reg.load_default(extra);
    for (const auto& r : reg.rejections()) warn("module rejected: " + r.to_string());
    // The vocabulary inside a GGUF model, or a tokenizer file (the embedded model's by default).
    std::unique_ptr<ModelSource> model;
    PluginSpec spec{o->plugin, {}};
    if (!o->model.empty()) {
      if (!o->tokenizer.empty()) throw ConfigError("give --model or --tokenizer, not both");
      model = ModelSource::open(o->model);
      if (!model->gguf())
        throw ConfigError(o->model + " is a llama2.c checkpoint, which holds no vocabulary: use --tokenizer");
      if (spec.name.empty()) spec.name = tokenizer_for(reg, model->metadata(), o->model);  // the one that accepts it
    } else {
      std::string path = o->tokenizer;
      if (path.empty()) {
        auto def = default_model();
        if (!def) throw ConfigError("no --tokenizer given and no embedded default model installed");
        path = def->second.string();
      }
      spec.params.emplace_back("path", path);
    }
    if (spec.name.empty()) spec.name = "llama2c";
    auto tok = model ? reg.make_tokenizer(spec, model->metadata()) : reg.make_tokenizer(spec);
    // BOS only where the vocabulary asks for it (SentencePiece does, GPT-2 does not).
    EncodeOptions eo;
    eo.bos = !o->no_bos && tok->add_bos();
    eo.eos = o->eos;
    eo.parse_special = o->special;
    const auto ids = tok->encode(o->text, eo);
    // Control tokens (BOS, EOS) by their bare name, marked: llama2.c's vocabulary spells BOS "\n<s>\n".
    std::vector<std::string> pieces;
    std::vector<bool> special;
    for (auto id : ids) {
      special.push_back(tok->token_type(id) == TokenType::Control);
      pieces.emplace_back(special.back() ? control_name(*tok, id) : std::string(tok->piece(id)));
    }
    if (o->json) {
      std::cout << traces::dump(nlohmann::json{{"ids", ids}, {"pieces", pieces}, {"special", special}}) << "\n";
      return;
    }
    for (std::size_t i = 0; i < ids.size(); ++i) {
      std::cout << ids[i] << "\t";
      if (special[i]) {
        std::cout << pieces[i] << " (special)\n";
      } else {
        std::cout << traces::dump(nlohmann::json(pieces[i])) << "\n";
      }
    }
  });
}

}  // namespace glassbox::cli
