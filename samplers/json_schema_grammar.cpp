// JSON schema -> GBNF, in the manner of llama.cpp's json-schema-to-grammar (the same primitive rules,
// whitespace rule and property order: required properties first), for a documented subset; any other
// keyword is refused with its key path rather than silently ignored.
#include <functional>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include <glassbox/error.hpp>

#include "grammar_engine.hpp"

namespace glassbox::grammar {

namespace {

// ordered: properties keep the schema's order (llama.cpp's order: required ones first, each group as given)
using json = nlohmann::ordered_json;

// llama.cpp's primitive rules (SPACE_RULE and PRIMITIVE_RULES), with their dependencies.
struct Primitive {
  const char* name;
  const char* body;
  std::vector<const char*> deps;
};
const std::vector<Primitive>& primitives() {
  static const std::vector<Primitive> p = {
      {"space", R"(| " " | "\n"{1,2} [ \t]{0,20})", {}},
      {"boolean", R"(("true" | "false") space)", {"space"}},
      {"null", R"("null" space)", {"space"}},
      {"integral-part", R"([0] | [1-9] [0-9]{0,15})", {}},
      {"decimal-part", R"([0-9]{1,16})", {}},
      {"number", R"(("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)? space)", {"integral-part", "decimal-part", "space"}},
      {"integer", R"(("-"? integral-part) space)", {"integral-part", "space"}},
      {"char", R"([^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4}))", {}},
      {"string", R"("\"" char* "\"" space)", {"char", "space"}},
      {"value", R"(object | array | string | number | boolean | null)", {"object", "array", "string", "number", "boolean", "null"}},
      {"object", R"("{" space ( string ":" space value ("," space string ":" space value)* )? "}" space)", {"string", "value", "space"}},
      {"array", R"("[" space ( value ("," space value)* )? "]" space)", {"value", "space"}},
  };
  return p;
}

// A JSON value's serialization as a GBNF string literal.
std::string literal(const std::string& text) {
  std::string out = "\"";
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"') out += "\\\"";
    else if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7F) {
      static const char* hexd = "0123456789ABCDEF";
      out += "\\x";
      out += hexd[c >> 4];
      out += hexd[c & 15];
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

// JSON pointer escaping of one key (RFC 6901).
std::string pointer_key(const std::string& k) {
  std::string out;
  for (const char c : k) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

class Converter {
 public:
  explicit Converter(std::string source) : source_(std::move(source)) {}

  std::string run(const json& schema) {
    const std::string root = visit(schema, "");
    std::string out = "root ::= " + root + "\n";
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    // Primitives in a fixed order, each with what it needs.
    std::set<std::string> need;
    std::vector<std::string> todo(used_.begin(), used_.end());
    while (!todo.empty()) {
      const std::string n = todo.back();
      todo.pop_back();
      if (!need.insert(n).second) continue;
      for (const auto& p : primitives())
        if (n == p.name)
          for (const char* d : p.deps) todo.emplace_back(d);
    }
    for (const auto& p : primitives())
      if (need.count(p.name)) out += std::string(p.name) + " ::= " + p.body + "\n";
    return out;
  }

 private:
  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    throw ConfigError(source_ + ": " + what + " at " + (path.empty() ? "/" : path));
  }
  // A part used more than once (an array's item, an object's property) goes into a rule of its own and is
  // referred to by name: written in place, each level of 60 nested arrays would hold the one below twice
  // (2^60). Equal parts share one rule.
  std::string ref(const std::string& body, const char* kind) {
    if (body.find_first_of(" \"()[]|*+?{") == std::string::npos) return body;  // already a rule name
    auto [it, fresh] = by_body_.emplace(body, std::string());
    if (fresh) {
      it->second = std::string(kind) + "-" + std::to_string(rules_.size() + 1);
      rules_.emplace_back(it->second, body);
    }
    return it->second;
  }
  std::string use(const std::string& primitive) {
    used_.insert(primitive);
    return primitive;
  }
  std::int64_t count(const json& s, const char* key, const std::string& path) const {
    const json& v = s.at(key);
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() > 10000)
      fail(path + "/" + key, std::string("'") + key + "' = " + v.dump() + " (expected an integer 0..10000)");
    return v.get<std::int64_t>();
  }
  static std::string bounds(std::int64_t lo, std::int64_t hi) {  // hi < 0: unbounded
    return "{" + std::to_string(lo) + (hi < 0 ? "," : hi == lo ? "" : "," + std::to_string(hi)) + "}";
  }

  std::string visit(const json& s, const std::string& path) {
    if (++depth_ > 100) fail(path, "schemas nested more than 100 deep");
    struct Leave {
      int& d;
      ~Leave() { --d; }
    } leave{depth_};
    if (s.is_boolean()) {
      if (s.get<bool>()) return use("value");
      fail(path, "schema 'false' matches nothing");
    }
    if (!s.is_object()) fail(path, "expected a schema (a JSON object), found " + std::string(s.type_name()));
    static const std::set<std::string> known = {"type", "properties", "required", "additionalProperties", "items", "enum", "const",
                                                "minLength", "maxLength", "minItems", "maxItems",
                                                // annotations: no effect on what is valid
                                                "title", "description", "$schema", "$id", "$comment", "default", "examples"};
    for (const auto& [k, v] : s.items())
      if (!known.count(k))
        fail(path + "/" + pointer_key(k),
             "unsupported JSON-schema keyword '" + k +
                 "' (supported: type, properties, required, additionalProperties: false, items, enum, const, minLength, maxLength, "
                 "minItems, maxItems, and annotations)");
    if (s.contains("const")) {
      use("space");
      return literal(s["const"].dump()) + " space";
    }
    if (s.contains("enum")) {
      const json& e = s["enum"];
      if (!e.is_array() || e.empty()) fail(path + "/enum", "'enum' must be a non-empty list");
      std::string alts;
      for (const auto& v : e) alts += (alts.empty() ? "" : " | ") + literal(v.dump());
      use("space");
      return "(" + alts + ") space";
    }
    std::string type;
    if (s.contains("type")) {
      if (!s["type"].is_string()) fail(path + "/type", "'type' as a list of types is not supported (expected one type name)");
      type = s["type"].get<std::string>();
    } else if (s.contains("properties") || s.contains("additionalProperties") || s.contains("required")) {
      type = "object";
    } else if (s.contains("items")) {
      type = "array";
    } else {
      return use("value");
    }
    if (type == "object") return object(s, path);
    if (type == "array") return array(s, path);
    if (type == "string") {
      if (!s.contains("minLength") && !s.contains("maxLength")) return use("string");
      const std::int64_t lo = s.contains("minLength") ? count(s, "minLength", path) : 0;
      const std::int64_t hi = s.contains("maxLength") ? count(s, "maxLength", path) : -1;
      if (hi >= 0 && hi < lo) fail(path + "/maxLength", "maxLength < minLength");
      use("char");
      use("space");
      return "\"\\\"\" char" + bounds(lo, hi) + " \"\\\"\" space";
    }
    if (type == "number" || type == "integer" || type == "boolean" || type == "null") return use(type);
    fail(path + "/type", "unknown type '" + type + "' (expected object, array, string, number, integer, boolean or null)");
  }

  std::string object(const json& s, const std::string& path) {
    bool extra = false;
    if (s.contains("additionalProperties")) {
      const json& a = s["additionalProperties"];
      if (!a.is_boolean()) fail(path + "/additionalProperties", "additionalProperties as a schema is not supported (expected false)");
      extra = a.get<bool>();
    }
    const json props = s.contains("properties") ? s["properties"] : json::object();
    if (!props.is_object()) fail(path + "/properties", "'properties' must be an object");
    if (props.empty() && (extra || !s.contains("additionalProperties"))) return use("object");  // any object
    if (extra) fail(path + "/additionalProperties", "additionalProperties: true beside 'properties' is not supported (expected false)");
    std::set<std::string> required;
    if (s.contains("required")) {
      const json& r = s["required"];
      if (!r.is_array()) fail(path + "/required", "'required' must be a list of property names");
      for (std::size_t i = 0; i < r.size(); ++i) {
        if (!r[i].is_string() || !props.contains(r[i].get<std::string>()))
          fail(path + "/required/" + std::to_string(i), "required property " + r[i].dump() + " is not among 'properties'");
        required.insert(r[i].get<std::string>());
      }
    }
    use("space");
    std::vector<std::string> req, opt;
    for (const auto& [k, v] : props.items()) {
      const std::string kv = ref(literal(json(k).dump()) + " space \":\" space " + visit(v, path + "/properties/" + pointer_key(k)), "kv");
      (required.count(k) ? req : opt).push_back(kv);
    }
    std::string body;
    if (!req.empty()) {
      for (std::size_t i = 0; i < req.size(); ++i) body += (i ? " \",\" space " : "") + req[i];
      for (const auto& o : opt) body += " (\",\" space " + o + ")?";
    } else {
      // No required property: whichever optional one comes first has no comma before it; the ones after it
      // are a chain of rules (tail-j: property j or not, then tail-(j+1)), so that the size stays linear.
      std::vector<std::string> tail(opt.size() + 1);
      for (std::size_t j = opt.size(); j-- > 1;)
        tail[j] = ref("(\",\" space " + opt[j] + ")?" + (tail[j + 1].empty() ? "" : " " + tail[j + 1]), "tail");
      std::string alts;
      for (std::size_t i = 0; i < opt.size(); ++i) alts += (i ? " | " : "") + opt[i] + (tail[i + 1].empty() ? "" : " " + tail[i + 1]);
      body = "(" + alts + ")?";
    }
    return "\"{\" space " + body + " \"}\" space";
  }

  std::string array(const json& s, const std::string& path) {
    std::string item = "value";
    if (s.contains("items")) {
      if (s["items"].is_array()) fail(path + "/items", "'items' as a list (tuple) is not supported (expected one schema)");
      item = ref(visit(s["items"], path + "/items"), "item");
    } else {
      use("value");
    }
    use("space");
    const std::int64_t lo = s.contains("minItems") ? count(s, "minItems", path) : 0;
    const std::int64_t hi = s.contains("maxItems") ? count(s, "maxItems", path) : -1;
    if (hi >= 0 && hi < lo) fail(path + "/maxItems", "maxItems < minItems");
    const std::string more = "(\",\" space " + item + ")";
    std::string body;
    if (hi == 0) body = "";
    else if (lo == 0) body = "(" + item + " " + more + (hi < 0 ? "*" : hi == 1 ? "{0}" : bounds(0, hi - 1)) + ")?";
    else body = item + " " + more + bounds(lo - 1, hi < 0 ? -1 : hi - 1);
    return "\"[\" space " + body + " \"]\" space";
  }

  std::string source_;
  std::vector<std::pair<std::string, std::string>> rules_;  // generated rules (name, body), in order
  std::map<std::string, std::string> by_body_;              // body -> name
  std::set<std::string> used_;
  int depth_ = 0;
};

}  // namespace

std::string json_schema_to_gbnf(std::string_view schema_text, const std::string& source) {
  nlohmann::ordered_json ordered;
  try {
    ordered = nlohmann::ordered_json::parse(schema_text);
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(source + ": not valid JSON (" + e.what() + ")");
  }
  return Converter(source).run(ordered);
}

}  // namespace glassbox::grammar
