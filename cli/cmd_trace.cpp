// `glassbox trace validate|diff|render|html|lens|attention`: checking, comparing, drawing and viewing traces.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "commands.hpp"
#include "glassbox/error.hpp"
#include "glassbox/file_io.hpp"
#include "glassbox/pipeline.hpp"
#include "glassbox/registry.hpp"
#include "glassbox/traces/diff.hpp"
#include "glassbox/traces/html.hpp"
#include "glassbox/model/model_source.hpp"
#include "session.hpp"
#include "streaming.hpp"
#include "glassbox/traces/reader.hpp"
#include "glassbox/traces/render.hpp"

namespace glassbox::cli {

namespace {

// --to, or the output file's extension, or `fallback`.
std::string output_format(const std::string& to, const std::string& out, const std::string& fallback) {
  if (!to.empty()) return to;
  const std::string ext = std::filesystem::path(out).extension().string();
  if (ext == ".svg" || ext == ".png" || ext == ".dot") return ext.substr(1);
  if (ext == ".gv") return "dot";
  return fallback;
}

void add_validate(CLI::App* trace) {
  auto file = std::make_shared<std::string>();
  auto partial = std::make_shared<bool>(false);
  auto* cmd = trace->add_subcommand("validate", "check a trace against its format version, glassbox.trace/1 or /2 (exit 2 naming the bad line)");
  cmd->add_option("FILE", *file, "trace file (JSON Lines)")->required();
  cmd->add_flag("--partial", *partial, "accept a trace cut short (ending in an error or interrupted line, or just stopping) and say so");
  cmd->callback([file, partial] {
    traces::ReadOptions ro;
    ro.require_summary = !*partial;
    const auto t = traces::read_trace(*file, ro);
    std::cout << *file << ": valid " << t.schema() << ", " << t.steps.size() << " steps ("
              << (t.steps.empty() ? "none" : "prefill + " + std::to_string(t.steps.size() - 1) + " decode")
              << "), trace level " << traces::level_name(t.header.level) << ", sampler " << t.sampler_chain();
    if (t.complete()) std::cout << ", stop: " << t.summary->stop_reason << "\n";
    else if (t.end) std::cout << ", cut short: " << t.end->type << ": " << t.end->message << "\n";
    else std::cout << ", cut short: no last line (a crash or a kill)\n";
    // Valid all the same (docs/trace-format.md, "Versions"): said once, so that the file can be told apart
    // from a /1 trace as the first version defined it.
    if (const int line = t.legacy_base64_line())
      std::cerr << "glassbox: note: " << *file << ":" << line << ": base64 logits under " << t.schema()
                << " (legacy: written before the format became " << traces::kSchema << "); read as " << traces::kSchema << "\n";
  });
}

void add_diff(CLI::App* trace) {
  struct Args {
    std::string golden, next, profile;
    traces::DiffOptions opt;
    bool per_step = false;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = trace->add_subcommand(
      "diff", "compare a trace with a golden one step by step; exit 0 within tolerance, 1 regression, 2 unusable input");
  cmd->add_option("GOLDEN", a->golden, "the reference trace")->required();
  cmd->add_option("NEW", a->next, "the trace to check")->required();
  cmd->add_option("--atol", a->opt.atol, "absolute tolerance on logprobs and logits")->capture_default_str();
  cmd->add_option("--rtol", a->opt.rtol, "relative tolerance (times |golden value|)")->capture_default_str();
  cmd->add_option("--kl", a->opt.kl, "largest KL(golden || new) per step, nats")->capture_default_str();
  cmd->add_option("--top", a->opt.top_k, "candidates compared per step (0: all both traces list)")->capture_default_str();
  cmd->add_option("--nmse", a->opt.nmse, "largest NMSE of the centred logits, where both traces have every logit")->capture_default_str();
  std::string names;
  for (const auto& n : traces::diff_profile_names()) names += (names.empty() ? "" : "|") + n;
  cmd->add_option("--profile", a->profile, "a tolerance profile for the weights or engine compared (" + names +
                                               "; docs/golden-traces.md); --atol/--rtol/--kl/--nmse given as well override it");
  cmd->add_flag("--per-step", a->per_step, "print one verdict line per compared step");
  cmd->callback([a, cmd] {
    if (!a->profile.empty()) {
      auto p = traces::diff_profile(a->profile);
      if (!p) throw ConfigError("--profile '" + a->profile + "': unknown (expected one of " + [] {
        std::string all;
        for (const auto& n : traces::diff_profile_names()) all += (all.empty() ? "" : ", ") + n;
        return all;
      }() + ")");
      const traces::DiffOptions given = a->opt;
      a->opt = *p;
      a->opt.top_k = given.top_k;
      if (cmd->get_option("--atol")->count()) a->opt.atol = given.atol;
      if (cmd->get_option("--rtol")->count()) a->opt.rtol = given.rtol;
      if (cmd->get_option("--kl")->count()) a->opt.kl = given.kl;
      if (cmd->get_option("--nmse")->count()) a->opt.nmse = given.nmse;
    }
    // Neither a profile nor a tolerance: on a regression, the report proposes the profile of the models'
    // weight types (docs/golden-traces.md#a-profile-from-the-weight-types).
    a->opt.propose_profile = a->profile.empty() && !cmd->get_option("--atol")->count() && !cmd->get_option("--rtol")->count() &&
                             !cmd->get_option("--kl")->count() && !cmd->get_option("--nmse")->count();
    // NaN compares false with everything: a NaN tolerance would pass any difference.
    for (const auto& [name, v] : {std::pair{"--atol", a->opt.atol}, {"--rtol", a->opt.rtol}, {"--kl", a->opt.kl}, {"--nmse", a->opt.nmse}})
      if (!(v >= 0 && v < HUGE_VAL)) throw ConfigError(std::string(name) + " = " + std::to_string(v) + " (expected a finite number >= 0)");
    if (a->opt.top_k < 0) throw ConfigError("--top = " + std::to_string(a->opt.top_k) + " (expected >= 0)");
    const auto golden = traces::read_trace(a->golden);
    const auto next = traces::read_trace(a->next);
    const auto r = traces::diff_traces(golden, next, a->opt);
    if (a->per_step) traces::write_step_verdicts(std::cout, golden, next, r);
    traces::write_diff_report(std::cout, golden, next, r, a->opt);
    if (r.regression()) g_exit_code = 1;
  });
}

void add_render(CLI::App* trace) {
  struct Args {
    std::string file, out, to, steps;
    traces::TreeOptions opt;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = trace->add_subcommand("render", "draw the generation as a token tree (Graphviz): svg, png or dot");
  cmd->add_option("FILE", a->file, "trace file")->required();
  cmd->add_option("-o,--output", a->out, "output file")->required();
  cmd->add_option("--to", a->to, "svg | png | dot (default: from the output's extension, else svg)");
  cmd->add_option("--top", a->opt.top_k, "alternatives drawn per step")->capture_default_str();
  cmd->add_option("--steps", a->steps, "steps A:B to draw (from A up to, not including, B; A: or :B)");
  cmd->add_option("--wrap", a->opt.wrap, "steps per row: a longer path goes on in a new row (0: one row)")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  cmd->callback([a] {
    const std::string format = output_format(a->to, a->out, "svg");
    traces::check_render_format(format);
    if (!a->steps.empty()) traces::parse_step_range(a->steps, a->opt);
    refuse_output_over_input(a->out, "-o", {{"FILE", a->file}});
    const auto t = traces::read_trace(a->file);
    traces::render_tree(t, a->opt, format, a->out);
  });
}

// The prompt's tokens as the trace's own tokenizer decodes them, for the viewer's attention labels (a
// trace records texts only for generated tokens). Empty, with a warning, when that tokenizer cannot be
// opened from here (paths in a trace are as given where it was recorded).
std::vector<std::string> prompt_texts(const traces::Trace& t) {
  const auto& h = t.header;
  try {
    Registry reg;
    reg.load_default();
    PluginSpec spec{h.tokenizer.name, {}};
    for (const auto& [k, v] : h.tokenizer.params.values()) spec.params.emplace_back(k, traces::param_text(v));
    std::unique_ptr<Tokenizer> tok;
    if (h.tokenizer_path.empty()) {
      auto model = ModelSource::open(h.model.path);  // a GGUF model's own vocabulary
      tok = reg.make_tokenizer(spec, model->metadata());
    } else {
      tok = reg.make_tokenizer(spec);
    }
    std::vector<std::string> texts;
    std::int32_t prev = -1;
    for (auto id : h.prompt_ids) {
      if (id < 0 || id >= tok->vocab_size()) throw ConfigError("prompt id " + std::to_string(id) + " is outside its vocabulary");
      texts.push_back(tok->token_type(id) == TokenType::Control ? control_name(*tok, id) : std::string(tok->decode(prev, id)));
      prev = id;
    }
    return texts;
  } catch (const std::exception& e) {
    warn("the trace's tokenizer could not be opened (" + std::string(e.what()) + "): the viewer labels prompt tokens by id");
    return {};
  }
}

void add_html(CLI::App* trace) {
  auto file = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto* cmd = trace->add_subcommand("html", "write a self-contained HTML step viewer for a trace");
  cmd->add_option("FILE", *file, "trace file")->required();
  cmd->add_option("-o,--output", *out, "the .html file to write")->required();
  cmd->callback([file, out] {
    refuse_output_over_input(*out, "-o", {{"FILE", *file}});
    const auto t = traces::read_trace(*file);
    write_file_atomically(*out, traces::trace_html(t, prompt_texts(t)));
  });
}

// `trace lens`: the logit lens as a table — a row per step, a column per recorded point — each cell the
// token the output head would pick there and its probability: the terminal twin of the viewer's lens panel.
void add_lens(CLI::App* trace) {
  auto file = std::make_shared<std::string>();
  auto width = std::make_shared<int>(10);
  auto* cmd = trace->add_subcommand("lens", "print a trace's logit lens (run --trace-lens): each step's top token after every layer");
  cmd->add_option("FILE", *file, "trace file")->required();
  cmd->add_option("--width", *width, "characters of token text per cell")->check(CLI::Range(1, 64))->capture_default_str();
  cmd->callback([file, width] {
    const auto t = traces::read_trace(*file);
    const traces::TraceStep* first = nullptr;
    for (const auto& s : t.steps)
      if (s.lens) {
        first = &s;
        break;
      }
    if (!first) throw InputError(*file + ": no step has a logit lens (record one with run --trace --trace-lens)");
    const int cell = *width + 7;  // "text" + " 0.123"
    auto pad = [](std::string s, int w) {
      int shown = 0;  // UTF-8 characters, not bytes
      for (unsigned char c : s) shown += (c & 0xC0) != 0x80;
      if (shown < w) s += std::string(static_cast<std::size_t>(w - shown), ' ');
      return s;
    };
    auto end_line = [](std::string line) {  // no trailing blanks
      while (!line.empty() && line.back() == ' ') line.pop_back();
      std::cout << line << "\n";
    };
    // Where the answer settles: the first block layer from which the top token after every block is the last
    // block's (the model's answer); attention points are not counted. The viewer's lensSettles is the same rule.
    auto settles = [](const std::vector<traces::TraceLens>& lens) -> int {
      int answer = -1, at = -1;
      for (auto it = lens.rbegin(); it != lens.rend(); ++it) {
        if (it->attn || it->top.empty()) continue;
        if (answer < 0) answer = it->top[0].id;
        if (it->top[0].id != answer) break;
        at = it->layer;
      }
      return at;
    };
    std::string line = pad("step", 6) + pad("token", *width + 3);
    for (const auto& l : *first->lens) line += pad("L" + std::to_string(l.layer) + (l.attn ? " attn" : ""), cell);
    line += "settles";
    end_line(line);
    for (const auto& s : t.steps) {
      if (!s.lens) continue;
      line = pad(std::to_string(s.step), 6) + pad(traces::show_text(s.token_text, static_cast<std::size_t>(*width)), *width + 3);
      for (const auto& l : *s.lens) {
        if (l.top.empty()) {
          line += pad("-", cell);
          continue;
        }
        char prob[16];
        std::snprintf(prob, sizeof prob, " %.3f", l.top[0].prob);
        line += pad(traces::show_text(l.top[0].text, static_cast<std::size_t>(*width)) + prob, cell);
      }
      const int at = settles(*s.lens);
      line += at < 0 ? "-" : "L" + std::to_string(at);
      end_line(line);
    }
    std::cout << "(each cell: the most likely next token if the model ended after that layer, and its probability;\n"
                 " the last layer column is the step's own distribution; settles: the first layer from which the top\n"
                 " token after every block is already the final answer)\n";
  });
}

// `trace attention`: for each recorded head at a step, the position its newest query attends to most, and
// with what weight — the terminal twin of the viewer's caption ("which heads look at what"), so that a
// copying head (the one that looks back at a name) shows itself by name.
void add_attention(CLI::App* trace) {
  auto file = std::make_shared<std::string>();
  auto step = std::make_shared<int>(-1);
  auto* cmd = trace->add_subcommand("attention",
                                    "print, per head, the position a step attends to most (run --trace-attention): which heads look at what");
  cmd->add_option("FILE", *file, "trace file")->required();
  cmd->add_option("--step", *step, "the step to show (default: every step that recorded attention)")->check(CLI::NonNegativeNumber);
  cmd->callback([file, step] {
    const auto t = traces::read_trace(*file);
    bool any = false;
    for (const auto& s : t.steps) any |= s.attention && !s.attention->empty();
    if (!any) throw InputError(*file + ": no step has attention weights (record them with run or chat --trace --trace-attention all)");
    // Each position's text: the prompt's from the trace's tokenizer, then the tokens the steps appended.
    const std::vector<std::string> prompt = prompt_texts(t);
    const auto n_prompt = static_cast<int>(t.header.prompt_ids.size());
    auto text_at = [&](int pos) -> std::string {
      if (pos < n_prompt)
        return pos < static_cast<int>(prompt.size()) ? traces::show_text(prompt[static_cast<std::size_t>(pos)], 12)
                                                     : "#" + std::to_string(t.header.prompt_ids[static_cast<std::size_t>(pos)]);
      for (const auto& s : t.steps)
        if (s.pos == pos - 1) return traces::show_text(s.token_text, 12);  // a step's token goes after its query
      return "?";
    };
    bool shown = false;
    for (const auto& s : t.steps) {
      if (!s.attention || s.attention->empty() || (*step >= 0 && s.step != *step)) continue;
      shown = true;
      std::cout << "step " << s.step << ": the query at position " << s.attention->front().pos << " (" << text_at(s.attention->front().pos)
                << ") chose " << traces::show_text(s.token_text, 12) << "\n";
      for (const auto& row : *s.attention) {
        if (row.weights.empty()) continue;
        const auto best = static_cast<int>(std::max_element(row.weights.begin(), row.weights.end()) - row.weights.begin());
        char w[16];
        std::snprintf(w, sizeof w, "%.3f", row.weights[static_cast<std::size_t>(best)]);
        const int pos = row.first_pos + best;
        std::cout << "  L" << row.layer << " h" << row.head << "  position " << pos << " " << text_at(pos) << " " << w << "\n";
      }
    }
    if (!shown) throw InputError(*file + ": step " + std::to_string(*step) + " recorded no attention weights");
  });
}

}  // namespace

void add_trace_command(CLI::App& app) {
  auto* trace = app.add_subcommand("trace", "validate, compare, draw and view traces (docs/trace-format.md)");
  trace->require_subcommand(1);
  add_validate(trace);
  add_diff(trace);
  add_render(trace);
  add_html(trace);
  add_lens(trace);
  add_attention(trace);
  add_trace_import(trace);
}

std::function<bool(const std::vector<std::string>&)> add_plugins_graph_options(CLI::App* plugins) {
  struct Args {
    bool graph = false;
    std::string out, to, sampler, attention = "kv-cache", tokenizer_plugin = "llama2c", model;
  };
  auto a = std::make_shared<Args>();
  plugins->add_flag("--graph", a->graph, "draw the configured pipeline (Graphviz) instead of listing plugins");
  plugins->add_option("-o,--output", a->out, "with --graph: output file (default: DOT on stdout)");
  plugins->add_option("--to", a->to, "with --graph: svg | png | dot (default: from the output's extension)");
  plugins->add_option("--sampler,-s", a->sampler, "with --graph: the sampler chain to draw (default: default)");
  plugins->add_option("--attention", a->attention, "with --graph: the attention plugin")->capture_default_str();
  plugins->add_option("--tokenizer-plugin", a->tokenizer_plugin, "with --graph: the tokenizer plugin")->capture_default_str();
  plugins->add_option("--model,-m", a->model, "with --graph: the model named in the drawing");
  return [a](const std::vector<std::string>& plugin_path) {
    if (!a->graph) {
      if (!a->out.empty() || !a->to.empty() || !a->sampler.empty() || !a->model.empty())
        throw ConfigError("-o, --to, --sampler and --model go with --graph");
      return false;
    }
    const std::string format = output_format(a->to, a->out, "dot");
    traces::check_render_format(format);
    if (a->out.empty() && format != "dot") throw ConfigError("--to " + format + " needs -o FILE");
    Registry reg;
    reg.load_default(std::vector<std::filesystem::path>(plugin_path.begin(), plugin_path.end()));
    traces::PipelineDesc p;
    reg.resolve(PluginKind::Tokenizer, {a->tokenizer_plugin, {}});  // an unknown name is an error
    p.tokenizer = {"tokenizer", a->tokenizer_plugin, ""};             // its file is not needed to draw it
    const PluginSpec attn = parse_plugin_spec(a->attention, "attention");
    p.attention = {"attention", attn.name, reg.resolve(PluginKind::Attention, attn).to_string()};
    // capacity 0 means "as many positions as the run's context": say that, not a cache that holds nothing.
    if (auto at = p.attention.params.find("capacity=0"); at != std::string::npos &&
        (at + 10 == p.attention.params.size() || p.attention.params[at + 10] == ','))
      p.attention.params.replace(at, 10, "capacity = context");
    std::vector<std::string> warnings;
    auto stages = build_sampler_stages(
        reg, a->sampler.empty() ? std::vector<PluginSpec>{{"default", {}}} : parse_plugin_chain(a->sampler, "sampler"),
        warnings);
    for (const auto& w : warnings) std::cerr << "glassbox: warning: " << w << "\n";
    for (const auto& s : stages) p.samplers.push_back({"sampler", s->name(), s->params().to_string()});
    p.model = a->model.empty() ? std::string() : std::filesystem::path(a->model).filename().string();
    if (a->out.empty()) std::cout << traces::pipeline_dot(p);
    else traces::render_pipeline(p, format, a->out);
    return true;
  };
}

}  // namespace glassbox::cli
