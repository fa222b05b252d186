// Typed plugin parameters: parsing user text against a ParamSpec and reading values back.
#include "glassbox/params.hpp"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>

#include "glassbox/error.hpp"

namespace glassbox {

const ParamValue& Params::at(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) throw ConfigError("parameter '" + name + "' is not set");
  return it->second;
}

std::int64_t Params::get_int(const std::string& name) const {
  const auto& v = at(name);
  if (auto* i = std::get_if<std::int64_t>(&v)) return *i;
  throw ConfigError("parameter '" + name + "' is not an integer");
}

double Params::get_float(const std::string& name) const {
  const auto& v = at(name);
  if (auto* d = std::get_if<double>(&v)) return *d;
  if (auto* i = std::get_if<std::int64_t>(&v)) return static_cast<double>(*i);
  throw ConfigError("parameter '" + name + "' is not a number");
}

const std::string& Params::get_string(const std::string& name) const {
  const auto& v = at(name);
  if (auto* s = std::get_if<std::string>(&v)) return *s;
  throw ConfigError("parameter '" + name + "' is not a string");
}

bool Params::get_bool(const std::string& name) const {
  const auto& v = at(name);
  if (auto* b = std::get_if<bool>(&v)) return *b;
  throw ConfigError("parameter '" + name + "' is not a boolean");
}

std::string format_param_value(const ParamValue& v) {
  if (auto* i = std::get_if<std::int64_t>(&v)) return std::to_string(*i);
  if (auto* d = std::get_if<double>(&v)) {
    std::ostringstream os;
    os.precision(9);
    os << *d;
    return os.str();
  }
  if (auto* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  return std::get<std::string>(v);
}

std::string Params::to_string() const {
  std::string out;
  for (const auto& [k, v] : values_) {
    if (!out.empty()) out += ", ";
    out += k + "=" + format_param_value(v);
  }
  return out;
}

std::string param_type_name(ParamType t) {
  switch (t) {
    case ParamType::Int: return "integer";
    case ParamType::Float: return "number";
    case ParamType::String: return "string";
    case ParamType::Bool: return "boolean";
  }
  return "?";
}

ParamValue parse_param(const std::string& owner, const ParamSpec& spec, const std::string& text) {
  auto bad = [&](const std::string& why) {
    return ConfigError(owner + ": parameter '" + spec.name + "' = '" + text + "' " + why);
  };
  // The range as the message states it: "(expected 0 <= p <= 1)".
  auto expected = [&] {
    std::string r = "(expected ";
    if (spec.min) r += format_param_value(*spec.min) + " <= ";
    r += spec.name;
    if (spec.max) r += " <= " + format_param_value(*spec.max);
    return r + ")";
  };
  auto check_range = [&](double x) {
    if (spec.min && x < *spec.min) throw bad("is below the minimum " + format_param_value(*spec.min) + " " + expected());
    if (spec.max && x > *spec.max) throw bad("is above the maximum " + format_param_value(*spec.max) + " " + expected());
  };
  switch (spec.type) {
    case ParamType::Int: {
      std::int64_t v = 0;
      auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (ec != std::errc() || p != text.data() + text.size() || text.empty())
        throw bad("is not an integer");
      check_range(static_cast<double>(v));
      // Plugins compute with int: without a declared range, an integer parameter is 32-bit.
      if (!spec.max && v > INT32_MAX) throw bad("is above the maximum 2147483647");
      if (!spec.min && v < INT32_MIN) throw bad("is below the minimum -2147483648");
      return v;
    }
    case ParamType::Float: {
      double v = 0;
      auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (ec != std::errc() || p != text.data() + text.size() || text.empty())
        throw bad("is not a number");
      if (!std::isfinite(v)) throw bad("is not a finite number");
      check_range(v);
      // Samplers compute in float: a value float cannot hold would become inf or 0 there.
      if (std::fabs(v) > std::numeric_limits<float>::max()) throw bad("is beyond float range (|x| <= 3.4e38)");
      if (v != 0 && std::fabs(v) < std::numeric_limits<float>::min())
        throw bad("is too small for float (|x| >= 1.2e-38, or 0)");
      return v;
    }
    case ParamType::Bool:
      if (text == "true" || text == "1" || text == "yes" || text == "on") return true;
      if (text == "false" || text == "0" || text == "no" || text == "off") return false;
      throw bad("is not a boolean (true/false)");
    case ParamType::String:
      return text;
  }
  throw bad("has an unknown type");
}

}  // namespace glassbox
