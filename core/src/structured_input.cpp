// The size and nesting checks that run before any JSON or YAML parser sees a file (structured_input.hpp).
#include "glassbox/structured_input.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "glassbox/file_io.hpp"

namespace glassbox {

namespace {

std::string too_deep() {
  return "nested deeper than " + std::to_string(kMaxInputNesting) + " levels (refused before parsing: the parser recurses per level)";
}

// JSON: brackets outside strings.
std::optional<std::string> json_problem(std::string_view text) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (const char ch : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (ch == '\\') escaped = true;
      else if (ch == '"') in_string = false;
    } else if (ch == '"') {
      in_string = true;
    } else if (ch == '[' || ch == '{') {
      if (++depth > kMaxInputNesting) return too_deep();
    } else if (ch == ']' || ch == '}') {
      --depth;
    }
  }
  return std::nullopt;
}

// YAML: flow brackets outside quotes and comments, plus each line's block levels (its indentation in
// two-column steps and the compact "- - -" markers that open one level each). Conservative: it may
// count a level too many for odd indentation, never too few.
std::optional<std::string> yaml_problem(std::string_view text) {
  int flow = 0;
  char quote = 0;
  bool line_start = true, comment = false;
  int indent = 0, dashes = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (ch == '\n') {
      comment = false, indent = 0, dashes = 0;
      line_start = quote == 0;  // a quoted scalar's continuation lines are not structure
      continue;
    }
    if (comment) continue;
    if (line_start) {
      if (ch == ' ') { ++indent; continue; }
      if (ch == '-' && i + 1 < text.size() && (text[i + 1] == ' ' || text[i + 1] == '\n')) {
        ++dashes;
        if ((indent + 1) / 2 + dashes + flow > kMaxInputNesting) return too_deep();
        continue;
      }
      line_start = false;
      if ((indent + 1) / 2 + dashes + flow > kMaxInputNesting) return too_deep();
    }
    if (quote) {
      if (quote == '"' && ch == '\\') ++i;
      else if (ch == quote) quote = 0;
      continue;
    }
    if (ch == '"' || ch == '\'') quote = ch;
    else if (ch == '#') comment = true;
    else if (ch == '[' || ch == '{') {
      if (++flow + (indent + 1) / 2 + dashes > kMaxInputNesting) return too_deep();
    } else if (ch == ']' || ch == '}') {
      if (flow > 0) --flow;
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> structured_text_problem(std::string_view text, Syntax syntax) {
  if (text.size() > kMaxStructuredInputBytes)
    return std::to_string(text.size()) + " bytes, more than the " + std::to_string(kMaxStructuredInputBytes >> 20) + " MiB read at most";
  return syntax == Syntax::Json ? json_problem(text) : yaml_problem(text);
}

std::optional<std::string> read_structured_file(const std::string& path, std::string& why) {
  if (auto bad = not_a_regular_file(path)) {
    why = *bad;
    return std::nullopt;
  }
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) {
    why = std::string("cannot open: ") + std::strerror(errno);
    return std::nullopt;
  }
  const auto size = static_cast<std::uint64_t>(f.tellg());
  if (size > kMaxStructuredInputBytes) {
    why = std::to_string(size) + " bytes, more than the " + std::to_string(kMaxStructuredInputBytes >> 20) + " MiB read at most";
    return std::nullopt;
  }
  f.seekg(0);
  std::string text(size, '\0');
  if (!f.read(text.data(), static_cast<std::streamsize>(size))) {
    why = "cannot read";
    return std::nullopt;
  }
  return text;
}

}  // namespace glassbox
