// Drawing with Graphviz (libgvc, linked): a trace as a token tree, a configured pipeline as a flow.
#pragma once
#include <string>
#include <vector>

#include "glassbox/traces/reader.hpp"

namespace glassbox::traces {

// Output formats: "svg", "png" (needs Graphviz's cairo plugin), "dot" (the graph source, not laid out).
// Throws ConfigError for another format name, TraceError when Graphviz cannot lay out or write.
void check_render_format(const std::string& format);

// render_tree lays out at most this many steps (svg, png); more is a ConfigError suggesting --steps.
inline constexpr int kMaxDrawnSteps = 400;

struct TreeOptions {
  int top_k = 3;    // alternatives drawn per step (besides the chosen token)
  int first = 0;    // steps [first, last) ...
  int last = -1;    // ... -1: to the end
  int wrap = 10;    // steps per row: the path goes on in a new row after this many (0: one row)
};

// "A:B", "A:", ":B" -> [A, B). Throws ConfigError naming the text.
void parse_step_range(const std::string& text, TreeOptions& opt);

// The generation as a tree: a root with the text before the first drawn step, the chosen tokens along
// the main path, each step's top-K alternatives as side branches labelled with their probability;
// edge width and colour follow the probability; each chosen node shows the KV cache after its step.
// Nodes: 1 + for each drawn step, 1 (chosen) + its alternatives (the top-K without the chosen token), + one
// row head (class "row") for each row after the first when the steps are wrapped (TreeOptions::wrap).
std::string tree_dot(const Trace& t, const TreeOptions& opt);
void render_tree(const Trace& t, const TreeOptions& opt, const std::string& format, const std::string& out_path);

// One box of the pipeline drawing.
struct PipelineStage {
  std::string kind;    // "tokenizer", "attention", "sampler"
  std::string name;    // plugin name
  std::string params;  // "k=40, temp=0.8"
};
struct PipelineDesc {
  PipelineStage tokenizer;
  PipelineStage attention;
  std::vector<PipelineStage> samplers;  // in chain order
  std::string model;                    // what the forward pass runs (may be empty)
};

// tokenize -> prefill -> each sampler stage -> detokenize/stream, with the decode loop feeding the
// chosen token back, and the attention plugin's K/V cache beside prefill and decode.
std::string pipeline_dot(const PipelineDesc& p);
void render_pipeline(const PipelineDesc& p, const std::string& format, const std::string& out_path);

}  // namespace glassbox::traces
