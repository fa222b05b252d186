// What the WebAssembly build's C++ library lacks (included ahead of every C++ file there, by the top
// CMakeLists.txt): emscripten 3.1.6's libc++ (LLVM 14) has std::from_chars and std::to_chars for integers only,
// and no std::bit_cast. These supply them with the standard's contracts, so numbers are parsed and printed
// as natively, byte for byte (traces are compared across machines):
// - from_chars(float/double), chars_format::general: no leading blanks or '+', no hexadecimal (digits, an
//   optional '.', an optional exponent; or inf/infinity/nan/nan(chars)), the pattern's end in ptr,
//   invalid_argument with ptr == first when nothing matches, result_out_of_range (value untouched) beyond the
//   type. The digits go to musl's strtof/strtod, which round correctly, as from_chars does.
// - to_chars(float) shortest (plain: fixed or scientific, whichever is shorter, fixed on a tie; fixed prints
//   an integer's exact value) and chars_format::scientific shortest: the fewest digits that read back as the
//   same float, the closest such to the value (musl's printf is exact: the correctly rounded candidate, or
//   its neighbour where the rounding interval is lopsided at a power of two).
#pragma once
#include <bit>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>
#include <system_error>

namespace glassbox::web_compat {

inline const char* float_pattern_end(const char* first, const char* last) {
  const char* p = first;
  if (p != last && *p == '-') ++p;
  auto word = [&](const char* w) {  // case-insensitive prefix
    const char* q = p;
    for (; *w; ++w, ++q)
      if (q == last || std::tolower(static_cast<unsigned char>(*q)) != *w) return static_cast<const char*>(nullptr);
    return q;
  };
  if (const char* q = word("infinity")) return q;
  if (const char* q = word("inf")) return q;
  if (const char* q = word("nan")) {
    if (q != last && *q == '(') {  // nan(n-char-sequence)
      const char* r = q + 1;
      while (r != last && (std::isalnum(static_cast<unsigned char>(*r)) || *r == '_')) ++r;
      if (r != last && *r == ')') return r + 1;
    }
    return q;
  }
  const char* digits = p;
  while (p != last && *p >= '0' && *p <= '9') ++p;
  bool any = p != digits;
  if (p != last && *p == '.') {
    const char* frac = ++p;
    while (p != last && *p >= '0' && *p <= '9') ++p;
    any = any || p != frac;
  }
  if (!any) return nullptr;
  if (p != last && (*p == 'e' || *p == 'E')) {  // an exponent only when it has digits
    const char* e = p + 1;
    if (e != last && (*e == '+' || *e == '-')) ++e;
    const char* ed = e;
    while (e != last && *e >= '0' && *e <= '9') ++e;
    if (e != ed) p = e;
  }
  return p;
}

template <class T>
std::from_chars_result from_chars_float(const char* first, const char* last, T& value) {
  const char* end = float_pattern_end(first, last);
  if (!end) return {first, std::errc::invalid_argument};
  const std::string text(first, end);
  char* stop = nullptr;
  errno = 0;
  const T v = sizeof(T) == sizeof(float) ? static_cast<T>(std::strtof(text.c_str(), &stop)) : static_cast<T>(std::strtod(text.c_str(), &stop));
  if (stop != text.c_str() + text.size()) return {first, std::errc::invalid_argument};
  if (errno == ERANGE && (v == 0 || std::isinf(v))) return {end, std::errc::result_out_of_range};
  value = v;
  return {end, std::errc{}};
}

// The shortest decimal digits (no point) of finite f > 0 that read back as f, and the exponent of the first.
inline int shortest_digits(float f, char* digits, int& exp10) {
  auto parse = [&](const char* s) {  // "D.DDDe±X" -> digits, exponent
    int k = 0;
    const char* q = s;
    for (; *q && *q != 'e'; ++q)
      if (*q != '.') digits[k++] = *q;
    exp10 = std::atoi(q + 1);
    return k;
  };
  char buf[64];
  for (int p = 0; p <= 9; ++p) {
    std::snprintf(buf, sizeof buf, "%.*e", p, static_cast<double>(f));
    if (std::strtof(buf, nullptr) == f) return parse(buf);
    // The closest p+1 digits miss the float: one of its neighbours may not (a lopsided interval).
    char d[16];
    int e = 0;
    const int k = parse(buf);
    std::memcpy(d, digits, k);
    long long m = std::atoll(std::string(d, k).c_str());
    e = exp10;
    for (long long c : {m - 1, m + 1}) {
      const std::string cs = std::to_string(c);
      if (static_cast<int>(cs.size()) != k) continue;
      std::string t = cs.substr(0, 1) + (k > 1 ? "." + cs.substr(1) : "") + "e" + std::to_string(e);
      if (std::strtof(t.c_str(), nullptr) == f) {
        std::memcpy(digits, cs.data(), k);
        exp10 = e;
        return k;
      }
    }
  }
  std::snprintf(buf, sizeof buf, "%.8e", static_cast<double>(f));  // (9 digits always read back)
  return parse(buf);
}

inline std::to_chars_result to_chars_float(char* first, char* last, float f, bool scientific_only) {
  std::string s;
  if (std::signbit(f)) s += '-';
  if (std::isnan(f)) {
    s += "nan";
  } else if (std::isinf(f)) {
    s += "inf";
  } else if (f == 0) {
    s += scientific_only ? "0e+00" : "0";
  } else {
    char dg[16];
    int e = 0;
    const int k = shortest_digits(std::fabs(f), dg, e);
    std::string sci(dg, 1);
    if (k > 1) sci += "." + std::string(dg + 1, k - 1);
    char ex[8];
    std::snprintf(ex, sizeof ex, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
    sci += ex;
    const int n = e + 1;  // digits before the point
    std::string fixed;
    if (n >= k) {  // an integer: its exact value
      char ib[64];
      std::snprintf(ib, sizeof ib, "%.0f", static_cast<double>(std::fabs(f)));
      fixed = ib;
    } else if (n > 0) {
      fixed = std::string(dg, n) + "." + std::string(dg + n, k - n);
    } else {
      fixed = "0." + std::string(-n, '0') + std::string(dg, k);
    }
    s += (scientific_only || sci.size() < fixed.size()) ? sci : fixed;
  }
  if (static_cast<std::size_t>(last - first) < s.size()) return {last, std::errc::value_too_large};
  std::memcpy(first, s.data(), s.size());
  return {first + s.size(), std::errc{}};
}

}  // namespace glassbox::web_compat

namespace std {
inline from_chars_result from_chars(const char* first, const char* last, float& value, chars_format = chars_format::general) {
  return glassbox::web_compat::from_chars_float(first, last, value);
}
inline from_chars_result from_chars(const char* first, const char* last, double& value, chars_format = chars_format::general) {
  return glassbox::web_compat::from_chars_float(first, last, value);
}
inline to_chars_result to_chars(char* first, char* last, float value) {
  return glassbox::web_compat::to_chars_float(first, last, value, false);
}
inline to_chars_result to_chars(char* first, char* last, float value, chars_format fmt) {
  if (fmt != chars_format::scientific) std::abort();  // (glassbox calls for scientific only)
  return glassbox::web_compat::to_chars_float(first, last, value, true);
}
#if !defined(__cpp_lib_bit_cast)
template <class To, class From>
constexpr To bit_cast(const From& from) noexcept {
  return __builtin_bit_cast(To, from);
}
#endif
}  // namespace std
