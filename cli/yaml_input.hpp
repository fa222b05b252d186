// YAML files (--config, compare experiments) through the limits every JSON and YAML input has
// (glassbox/structured_input.hpp): size and nesting checked on the text before yaml-cpp, whose parser
// and node copies recurse per level, sees it; errors are E naming the file.
#pragma once
#include <string>

#include <yaml-cpp/yaml.h>

#include "glassbox/structured_input.hpp"

namespace glassbox::cli {

template <class E>
YAML::Node parse_yaml_input(const std::string& text, const std::string& what) {
  if (auto why = structured_text_problem(text, Syntax::Yaml)) throw E(what + ": " + *why);
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw E(what + ": invalid YAML at line " + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
}

template <class E>
YAML::Node read_yaml_input(const std::string& path, const std::string& expected) {
  std::string why;
  auto text = read_structured_file(path, why);
  if (!text) throw E(path + ": " + why + " (expected " + expected + ")");
  return parse_yaml_input<E>(*text, path);
}

}  // namespace glassbox::cli
