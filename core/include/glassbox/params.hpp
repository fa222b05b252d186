// Named, typed plugin parameters: the schema a factory declares and the values it receives.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace glassbox {

enum class ParamType { Int, Float, String, Bool };

// One parameter a plugin accepts. min/max bound numeric values (inclusive).
struct ParamSpec {
  std::string name;
  ParamType type = ParamType::Float;
  std::string default_value;  // as text; parsed like user input
  std::string help;
  std::optional<double> min, max;
};

using ParamValue = std::variant<std::int64_t, double, std::string, bool>;

// The validated parameters a plugin instance was created with (defaults filled in).
class Params {
 public:
  void set(const std::string& name, ParamValue v) { values_[name] = std::move(v); }
  bool has(const std::string& name) const { return values_.count(name) != 0; }
  std::int64_t get_int(const std::string& name) const;
  double get_float(const std::string& name) const;  // Int values widen
  const std::string& get_string(const std::string& name) const;
  bool get_bool(const std::string& name) const;
  const std::map<std::string, ParamValue>& values() const { return values_; }
  // "k=40, temp=0.8" for messages and listings.
  std::string to_string() const;

 private:
  const ParamValue& at(const std::string& name) const;
  std::map<std::string, ParamValue> values_;
};

std::string param_type_name(ParamType t);
std::string format_param_value(const ParamValue& v);

// Parses `text` as a value of `spec` (e.g. "0.9" for a Float); throws ConfigError naming
// `owner` (e.g. "sampler 'top-p'"), the parameter and the value when it does not fit.
ParamValue parse_param(const std::string& owner, const ParamSpec& spec, const std::string& text);

}  // namespace glassbox
