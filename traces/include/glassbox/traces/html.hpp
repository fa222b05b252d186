// The HTML step viewer: one self-contained page (no network, no external script) with the trace embedded.
#pragma once
#include <string>
#include <vector>

#include "glassbox/traces/reader.hpp"

namespace glassbox::traces {

// The page for `t`: the hand-written viewer (traces/viewer/viewer.html) with the trace's lines embedded
// as JSON. Per-step "logits" are left out (the viewer does not use them; they would dominate the size).
// `prompt_texts`, when given (one per header.prompt_ids, as the trace's tokenizer decodes them), goes in
// as one more line, {"type": "prompt_texts", "texts": [...]}: the attention heatmap labels the prompt's
// positions with them (without it they show as #ID, a trace records no text for its prompt's tokens).
std::string trace_html(const Trace& t, const std::vector<std::string>& prompt_texts = {});

// The viewer with no trace embedded: it offers to open a trace file instead.
std::string viewer_html();

}  // namespace glassbox::traces
