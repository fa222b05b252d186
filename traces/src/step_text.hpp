// A trace step line as text: StepLine (the text with its floats formatted last, on whichever thread
// finishes it) and write_step, the one serializer of a step (TraceStep -> its line). The writer and
// to_json(TraceStep) both go through it (traces-internal header).
#pragma once
#include <charconv>
#include <cmath>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/detail/conversions/to_chars.hpp>
#include <nlohmann/json.hpp>

#include "glassbox/params.hpp"
#include "glassbox/traces/schema.hpp"

namespace glassbox::traces {

// Writes a float's shortest round-trip text in nlohmann-json's layout at p (at most kMaxFloatText bytes;
// "null" for NaN and infinities); returns its end.
constexpr std::size_t kMaxFloatText = 24;
char* write_json_float(char* p, float f);

// A step line under construction: its text with the floats left out, and the floats with where each run
// of them goes. Filling it costs copies and integer formatting only; finish() formats the floats, which
// for a full-logit trace is most of the work, on whichever thread runs it.
struct StepLine {
  struct Gap {
    std::size_t at;       // offset in text
    std::size_t count;    // floats written there, comma-separated ...
    bool base64 = false;  // ... or as one base64 string of their float32 bytes
  };
  std::string text;
  std::vector<float> floats;
  std::vector<Gap> gaps;

  void clear() {
    text.clear();
    floats.clear();
    gaps.clear();
  }
  void raw(std::string_view s) { text += s; }
  void key(std::string_view k) {  // ,"k": (no comma before the first key of an object)
    if (text.back() != '{') text += ',';
    text += '"';
    text += k;
    text += "\":";
  }
  template <class Int>
  void integer(Int v) {
    char buf[24];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    text.append(buf, r.ptr);
  }
  template <class Ints>
  void integers(const Ints& v) {
    text += '[';
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (i) text += ',';
      integer(v[i]);
    }
    text += ']';
  }
  void boolean(bool b) { text += b ? "true" : "false"; }
  void number(double d) {  // a double (times, parameters): nlohmann-json's own printer, so the same text
    if (!std::isfinite(d)) {
      text += "null";
      return;
    }
    char buf[64];
    text.append(buf, nlohmann::detail::to_chars(buf, buf + sizeof buf, d));
  }
  void real(float f) {
    gaps.push_back({text.size(), 1});
    floats.push_back(f);
  }
  void reals(std::span<const float> v) {
    text += '[';
    gaps.push_back({text.size(), v.size()});
    floats.insert(floats.end(), v.begin(), v.end());
    text += ']';
  }
  void reals_base64(std::span<const float> v) {
    gaps.push_back({text.size(), v.size(), true});
    floats.insert(floats.end(), v.begin(), v.end());
  }
  // The same from doubles that hold float32 values (a step the writer copied from the engine).
  void reals(const std::vector<double>& v) {
    text += '[';
    gaps.push_back({text.size(), v.size()});
    floats.insert(floats.end(), v.begin(), v.end());
    text += ']';
  }
  void reals_base64(const std::vector<double>& v) {
    gaps.push_back({text.size(), v.size(), true});
    floats.insert(floats.end(), v.begin(), v.end());
  }
  void string(std::string_view s) {
    // Printable ASCII without quote or backslash is its own JSON text; anything else (controls, UTF-8,
    // half a character) goes through nlohmann-json's escaping so the text is the same as dump()'s.
    bool plain = true;
    for (unsigned char c : s) plain = plain && c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
    if (plain) {
      text += '"';
      text += s;
      text += '"';
    } else {
      text += dump(nlohmann::json(std::string(s)));
    }
  }
  void params(const Params& p) {
    text += '{';
    for (const auto& kv : p.values()) {  // std::map: sorted by key, as nlohmann::json's objects
      key(kv.first);
      std::visit([&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::string>) string(x);
        else if constexpr (std::is_same_v<T, bool>) boolean(x);
        else if constexpr (std::is_same_v<T, double>) number(x);
        else integer(x);
      }, kv.second);
    }
    text += '}';
  }

  // The finished line (with its newline), written into `buf` from offset `at` (grown, never shrunk: no
  // allocation once large enough); returns where it ends.
  // At most the finished line's length.
  std::size_t bound() const { return text.size() + floats.size() * (kMaxFloatText + 1) + 2 * gaps.size() + 1; }
  std::size_t finish(std::string& buf, std::size_t at) const {
    const std::size_t need = at + bound();
    if (buf.size() < need) buf.resize(need);
    char* const start = buf.data();
    char* p = start + at;
    std::size_t pos = 0, fi = 0;
    for (const auto& g : gaps) {
      std::memcpy(p, text.data() + pos, g.at - pos);
      p += g.at - pos;
      pos = g.at;
      if (g.base64) {  // 16/3 characters a float: within the kMaxFloatText + 1 reserved for it
        *p++ = '"';
        p = write_float32_base64(p, {floats.data() + fi, g.count});
        *p++ = '"';
        fi += g.count;
        continue;
      }
      for (std::size_t i = 0; i < g.count; ++i) {
        if (i) *p++ = ',';
        p = write_json_float(p, floats[fi++]);
      }
    }
    std::memcpy(p, text.data() + pos, text.size() - pos);
    p += text.size() - pos;
    *p++ = '\n';
    return static_cast<std::size_t>(p - start);
  }
  std::string_view finish(std::string& buf) const {
    const std::size_t end = finish(buf, 0);  // (may grow buf: its data() is read after)
    return {buf.data(), end};
  }
};

// How write_step writes a step: its logits (when it has them and `with_logits`) as `logits` says.
struct StepTextOptions {
  LogitsEncoding logits = LogitsEncoding::Base64;
  bool with_logits = true;
};

// The step's line into L (cleared first), keys in sorted order, as nlohmann::json prints an object, so
// that json::parse of the text and to_json agree. A step whose written.float32 is set (the writer's copy
// of an engine step) has float32 values in its reals: each is written as the float's shortest text. Any
// other step's reals are written as nlohmann-json prints a double.
void write_step(StepLine& L, const TraceStep& s, const StepTextOptions& opt);

}  // namespace glassbox::traces
