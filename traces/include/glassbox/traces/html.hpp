// The HTML step viewer: one self-contained page (no network, no external script) with the trace embedded.
#pragma once
#include <string>

#include "glassbox/traces/reader.hpp"

namespace glassbox::traces {

// The page for `t`: the hand-written viewer (traces/viewer/viewer.html) with the trace's lines embedded
// as JSON. Per-step "logits" are left out (the viewer does not use them; they would dominate the size).
std::string trace_html(const Trace& t);

// The viewer with no trace embedded: it offers to open a trace file instead.
std::string viewer_html();

}  // namespace glassbox::traces
