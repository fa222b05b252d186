// The drawing calls of glassbox/traces/render.hpp in a build without Graphviz (GLASSBOX_GRAPHVIZ=OFF: the
// WebAssembly build): each says that this build cannot draw, before any output file is opened.
#include "glassbox/error.hpp"
#include "glassbox/traces/render.hpp"

namespace glassbox::traces {

namespace {
[[noreturn]] void no_graphviz() {
  throw ConfigError("this build cannot render (built without Graphviz, as the WebAssembly build is): "
                    "draw the trace with a native glassbox (`glassbox trace render`), or view it with `glassbox trace html`");
}
}  // namespace

void check_render_format(const std::string&) { no_graphviz(); }
void parse_step_range(const std::string&, TreeOptions&) { no_graphviz(); }
std::string tree_dot(const Trace&, const TreeOptions&) { no_graphviz(); }
void render_tree(const Trace&, const TreeOptions&, const std::string&, const std::string&) { no_graphviz(); }
std::string pipeline_dot(const PipelineDesc&) { no_graphviz(); }
void render_pipeline(const PipelineDesc&, const std::string&, const std::string&) { no_graphviz(); }

}  // namespace glassbox::traces
