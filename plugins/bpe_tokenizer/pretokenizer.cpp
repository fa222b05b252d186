// The bpe tokenizer's pre-tokenizer (pretokenizer.hpp): the known regexes as code over generated Unicode
// tables, other regexes through ICU where the build has it. Each rule is the regex's leftmost-first
// backtracking match written out, and test_pretokenizer checks it against ICU's regex piece for piece.
#include "pretokenizer.hpp"

#include <algorithm>
#include <array>
#include <iterator>

#include <glassbox/error.hpp>

#ifndef GLASSBOX_BPE_HAVE_ICU  // set by plugins/bpe_tokenizer/CMakeLists.txt (GLASSBOX_ICU)
#define GLASSBOX_BPE_HAVE_ICU 0
#endif
#if GLASSBOX_BPE_HAVE_ICU
#include <unicode/regex.h>
#include <unicode/unistr.h>
#endif

namespace glassbox::bpe {

namespace {
#include "unicode_tables.inc"

// Latin-1's properties from the runs, looked up without a search (most text is mostly ASCII).
constexpr std::array<unsigned char, 256> latin1_props() {
  std::array<unsigned char, 256> t{};
  std::size_t r = 0;
  for (unsigned c = 0; c < 256; ++c) {
    while (r + 1 < std::size(kUnicodeRuns) && (kUnicodeRuns[r + 1] >> 4) <= c) ++r;
    t[c] = static_cast<unsigned char>(kUnicodeRuns[r] & 15);
  }
  return t;
}
constexpr std::array<unsigned char, 256> kLatin1 = latin1_props();

// The run holding c: the last whose first code point is <= c.
std::size_t run_of(char32_t c) {
  const unsigned key = (static_cast<unsigned>(c) << 4) | 15;
  return static_cast<std::size_t>(std::upper_bound(std::begin(kUnicodeRuns), std::end(kUnicodeRuns), key) - std::begin(kUnicodeRuns)) - 1;
}
}  // namespace

unsigned char unicode_props(char32_t c) {
  if (c < 256) return kLatin1[c];
  if (c > 0x10FFFF) return 0;
  return static_cast<unsigned char>(kUnicodeRuns[run_of(c)] & 15);
}
const char* unicode_tables_icu_version() { return GLASSBOX_UNICODE_TABLES_ICU_VERSION; }
const char* unicode_tables_unicode_version() { return GLASSBOX_UNICODE_TABLES_UNICODE_VERSION; }

std::optional<Rule> rule_for(std::string_view re) {
  if (re == kGpt2) return Rule::Gpt2;
  if (re == kLlama3 || re == kLlama3Original) return Rule::Llama3;
  if (re == kQwen2 || re == kQwen2Original) return Rule::Qwen2;
  if (re == kEachNumber) return Rule::EachNumber;
  if (re == kNumberRuns) return Rule::NumberRuns;
  if (re == kDefaultPunct) return Rule::DefaultPunct;
  if (re == kDigitTriples) return Rule::DigitTriples;
  return std::nullopt;
}

const char* rule_name(Rule r) {
  switch (r) {
    case Rule::Gpt2: return "gpt2";
    case Rule::Llama3: return "llama3";
    case Rule::Qwen2: return "qwen2";
    case Rule::EachNumber: return "each-number";
    case Rule::NumberRuns: return "number-runs";
    case Rule::DefaultPunct: return "default-punct";
    case Rule::DigitTriples: return "digit-triples";
  }
  return "?";
}

void decode(std::string_view text, CodePoints& out) {
  out.cp.clear();
  out.props.clear();
  out.off.clear();
  out.cp.reserve(text.size());
  out.props.reserve(text.size());
  out.off.reserve(text.size() + 1);
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  std::size_t hint = 0;  // the last run found: text mostly stays in one script
  for (std::size_t i = 0; i < n;) {
    const unsigned c = s[i];
    if (c < 0x80) {
      out.off.push_back(i);
      out.cp.push_back(c);
      out.props.push_back(kLatin1[c]);
      ++i;
      continue;
    }
    std::size_t len = (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    long cp = -1;
    if (len > 1 && i + len <= n) {
      cp = static_cast<long>(c & (0x7F >> len));
      for (std::size_t k = 1; k < len; ++k) {
        if ((s[i + k] & 0xC0) != 0x80) { cp = -1; break; }
        cp = (cp << 6) | (s[i + k] & 0x3F);
      }
      static constexpr long kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
      if (cp >= 0 && (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))) cp = -1;
    }
    if (cp < 0) cp = 0xFFFD, len = 1;
    out.off.push_back(i);
    out.cp.push_back(static_cast<char32_t>(cp));
    unsigned char p;
    if (cp < 256) {
      p = kLatin1[cp];
    } else {
      const unsigned key = static_cast<unsigned>(cp) << 4;
      if (!(key >= (kUnicodeRuns[hint] & ~15u) && (hint + 1 == std::size(kUnicodeRuns) || key < (kUnicodeRuns[hint + 1] & ~15u))))
        hint = run_of(static_cast<char32_t>(cp));
      p = static_cast<unsigned char>(kUnicodeRuns[hint] & 15);
    }
    out.props.push_back(p);
    i += len;
  }
  out.off.push_back(n);
}

std::u32string utf8_to_u32(std::string_view text) {
  std::u32string out;
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  for (std::size_t i = 0; i < n;) {
    const unsigned c = s[i];
    if (c < 0x80) { out += static_cast<char32_t>(c); ++i; continue; }
    // Table 3-7 of the Unicode standard: the well-formed sequences, by lead byte, and the range of the
    // second byte (the later ones are always 80..BF).
    std::size_t len = 0;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    char32_t cp = c & (0x7F >> len);
    std::size_t k = 1;
    for (; len > 0 && k < len && i + k < n; ++k) {
      const unsigned b = s[i + k];
      if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) break;
      cp = (cp << 6) | (b & 0x3F);
    }
    if (len > 0 && k == len) out += cp;
    else out += U'\uFFFD';  // the maximal subpart: the lead byte and the continuation bytes that fit
    i += len > 0 ? k : 1;
  }
  return out;
}

// ---- The rules ----

namespace {

// One rule's matcher at a position: the end of its match starting at i within [i, e), or i for none.
// Each is its regex's leftmost-first alternation with the regex engine's backtracking worked out.
struct Matcher {
  const char32_t* cp;
  const unsigned char* pr;
  std::uint32_t e;

  bool letter(std::uint32_t i) const { return pr[i] & kLetter; }
  bool number(std::uint32_t i) const { return pr[i] & kNumber; }
  bool space(std::uint32_t i) const { return pr[i] & kSpace; }
  bool other(std::uint32_t i) const { return !(pr[i] & (kLetter | kNumber | kSpace)); }  // [^\s\p{L}\p{N}]
  bool newline(std::uint32_t i) const { return cp[i] == '\r' || cp[i] == '\n'; }
  template <class P> std::uint32_t run(std::uint32_t i, P p) const {
    while (i < e && (this->*p)(i)) ++i;
    return i;
  }
  // ` ?X+`: a space then X+, else X+.
  template <class P> std::uint32_t space_then_run(std::uint32_t i, P p) const {
    if (cp[i] == ' ' && i + 1 < e && (this->*p)(i + 1)) return run(i + 1, p);
    return (this->*p)(i) ? run(i, p) : i;
  }
  // `\s+(?!\S)|\s+` at a space: the whole run of spaces when the region ends after it; else the run less
  // its last space (which is followed by one), unless that leaves nothing.
  std::uint32_t spaces(std::uint32_t i) const {
    const std::uint32_t j = run(i, &Matcher::space);
    return j == e || j - 1 == i ? j : j - 1;
  }
  // 's|'t|'re|'ve|'m|'ll|'d, ASCII letters in the case given (any case when any_case).
  std::uint32_t contraction(std::uint32_t i, bool any_case) const {
    if (cp[i] != '\'' || i + 1 >= e) return i;
    auto low = [&](std::uint32_t k) { return any_case && cp[k] >= 'A' && cp[k] <= 'Z' ? cp[k] + 32 : cp[k]; };
    const char32_t a = low(i + 1);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
    if (i + 2 < e) {
      const char32_t b = low(i + 2);
      if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
    }
    return i;
  }

  // kGpt2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  std::uint32_t gpt2(std::uint32_t i) const {
    std::uint32_t j = contraction(i, false);
    if (j == i) j = space_then_run(i, &Matcher::letter);
    if (j == i) j = space_then_run(i, &Matcher::number);
    if (j == i) j = space_then_run(i, &Matcher::other);
    if (j == i) j = spaces(i);  // what is left: a space not followed by what the above take
    return j;
  }

  // kLlama3 / kQwen2 (max_digits 3 / 1):
  // (?:'[sS]|...)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  std::uint32_t llama3(std::uint32_t i, std::uint32_t max_digits) const {
    std::uint32_t j = contraction(i, true);
    if (j != i) return j;
    if (letter(i)) return run(i, &Matcher::letter);
    if (!newline(i) && !number(i) && i + 1 < e && letter(i + 1)) return run(i + 1, &Matcher::letter);
    if (number(i)) {
      j = i;
      while (j < e && j - i < max_digits && number(j)) ++j;
      return j;
    }
    j = space_then_run(i, &Matcher::other);
    if (j != i) return run(j, &Matcher::newline);
    // A space: \s*[\r\n]+ backtracks from the end of the spaces to just past their last \r or \n.
    const std::uint32_t end = run(i, &Matcher::space);
    for (std::uint32_t k = end; k > i; --k)
      if (newline(k - 1)) return k;
    return spaces(i);
  }
};

bool default_punct(char32_t c, unsigned char p) {
  return (p & kPunct) || c == '$' || c == '+' || c == '<' || c == '=' || c == '>' || c == '^' || c == '~' || c == '|';
}

// Appends the matches of `match` in [a, b) and the gaps between them, as a regex find loop does.
template <class F> void find_all(std::uint32_t a, std::uint32_t b, std::vector<Range>& out, F match) {
  std::uint32_t at = a;  // end of the last match
  for (std::uint32_t i = a; i < b;) {
    const std::uint32_t j = match(i);
    if (j == i) { ++i; continue; }
    if (i > at) out.emplace_back(at, i);
    out.emplace_back(i, j);
    at = i = j;
  }
  if (at < b) out.emplace_back(at, b);
}

}  // namespace

void split(Rule rule, const CodePoints& text, Range piece, std::vector<Range>& out) {
  const std::uint32_t a = piece.first, b = piece.second;  // not a structured binding: clang 14 cannot capture one
  const Matcher m{text.cp.data(), text.props.data(), b};
  const char32_t* cp = text.cp.data();
  const unsigned char* pr = text.props.data();
  switch (rule) {
    case Rule::Gpt2: return find_all(a, b, out, [&](std::uint32_t i) { return m.gpt2(i); });
    case Rule::Llama3: return find_all(a, b, out, [&](std::uint32_t i) { return m.llama3(i, 3); });
    case Rule::Qwen2: return find_all(a, b, out, [&](std::uint32_t i) { return m.llama3(i, 1); });
    case Rule::EachNumber: return find_all(a, b, out, [&](std::uint32_t i) { return (pr[i] & kNumber) ? i + 1 : i; });
    case Rule::NumberRuns: return find_all(a, b, out, [&](std::uint32_t i) { return m.run(i, &Matcher::number); });
    case Rule::DefaultPunct:
      return find_all(a, b, out, [&](std::uint32_t i) {
        while (i < b && default_punct(cp[i], pr[i])) ++i;
        return i;
      });
    case Rule::DigitTriples:
      return find_all(a, b, out, [&](std::uint32_t i) {
        auto digit = [&](std::uint32_t k) { return k < b && cp[k] >= '0' && cp[k] <= '9'; };
        return digit(i) && digit(i + 1) && digit(i + 2) ? i + 3 : i;
      });
  }
}

// ---- The pre-tokenizer ----

#if GLASSBOX_BPE_HAVE_ICU
struct PreTokenizer::IcuPattern {
  std::unique_ptr<icu::RegexPattern> pattern;
};

namespace {
// ICU's \s lacks \v and U+0085; Unicode's White_Space (what Python's and Oniguruma's \s follow) has both.
std::string icu_pattern(const std::string& re) {
  std::string out;
  for (std::size_t i = 0; i < re.size(); ++i) {
    if (re[i] == '\\' && i + 1 < re.size()) {
      const char c = re[++i];
      if (c == 's') out += R"(\p{White_Space})";
      else if (c == 'S') out += R"(\P{White_Space})";
      else { out += '\\'; out += c; }
    } else {
      out += re[i];
    }
  }
  return out;
}

// The regexes' bounds: every real pre-tokenizer needs a few dozen steps per character.
constexpr int32_t kRegexStackBytes = 8 << 20;
int32_t regex_time_limit(int32_t units) { return 50 + units / 8; }
}  // namespace
#else
struct PreTokenizer::IcuPattern {};
#endif

bool PreTokenizer::has_icu() { return GLASSBOX_BPE_HAVE_ICU != 0; }

PreTokenizer::PreTokenizer(const std::vector<std::string>& regexes, const std::string& source, Engine engine) : source_(source) {
  for (const auto& re : regexes) {
    Step s{re, engine == Engine::Rules ? rule_for(re) : std::nullopt, nullptr};
    if (!s.rule) {
#if GLASSBOX_BPE_HAVE_ICU
      UErrorCode st = U_ZERO_ERROR;
      UParseError pe{};
      s.icu = std::make_unique<IcuPattern>();
      s.icu->pattern.reset(icu::RegexPattern::compile(icu::UnicodeString::fromUTF8(icu_pattern(re)), 0, pe, st));
      if (U_FAILURE(st)) throw TokenizerError(source_ + ": pre-tokenizer regex '" + re + "' does not compile: " + u_errorName(st));
#else
      if (engine == Engine::Icu) throw TokenizerError(source_ + ": this build has no ICU to split by regex '" + re + "'");
      throw TokenizerError(source_ + ": pre-tokenizer regex '" + re +
                           "' is not one of the built-in split rules (GPT-2, Llama 3, Qwen2, digits, llama.cpp's default) "
                           "and this build has no regex engine for arbitrary patterns (built without ICU)");
#endif
    }
    steps_.push_back(std::move(s));
  }
}

PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;
PreTokenizer::~PreTokenizer() = default;

void PreTokenizer::split(std::string_view text, std::vector<std::pair<std::size_t, std::size_t>>& out) const {
  out.clear();
  if (text.empty()) return;
  CodePoints t;
  decode(text, t);
  const auto n = static_cast<std::uint32_t>(t.cp.size());
  std::vector<Range> pieces{{0, n}}, next;
#if GLASSBOX_BPE_HAVE_ICU
  // The UTF-16 text ICU matches on, made when a step needs it: u16[k] is code point k's first unit, cpi[u]
  // the code point holding unit u.
  icu::UnicodeString u;
  std::vector<int32_t> u16;
  std::vector<std::uint32_t> cpi;
#endif
  for (const auto& step : steps_) {
    next.clear();
    if (step.rule) {
      for (const auto& p : pieces) bpe::split(*step.rule, t, p, next);
      pieces.swap(next);
      continue;
    }
#if GLASSBOX_BPE_HAVE_ICU
    if (u16.empty()) {
      u16.reserve(n + 1);
      for (std::uint32_t k = 0; k < n; ++k) {
        u16.push_back(u.length());
        cpi.push_back(k);
        if (t.cp[k] > 0xFFFF) cpi.push_back(k);
        u.append(static_cast<UChar32>(t.cp[k]));
      }
      u16.push_back(u.length());
      cpi.push_back(n);
    }
    UErrorCode st = U_ZERO_ERROR;
    std::unique_ptr<icu::RegexMatcher> m(step.icu->pattern->matcher(u, st));
    if (U_FAILURE(st)) throw TokenizerError(source_ + ": regex matcher failed: " + u_errorName(st));
    // A pattern from a file may backtrack catastrophically: ICU stops it after a number of match steps
    // (its "time limit", in units of about 10,000 steps) that grows with the piece, and its backtracking
    // stack is capped, instead of running for ever or exhausting memory.
    m->setStackLimit(kRegexStackBytes, st);
    for (auto [pa, pb] : pieces) {
      const int32_t a = u16[pa], b = u16[pb];
      m->region(a, b, st);
      m->setTimeLimit(regex_time_limit(b - a), st);
      int32_t at = a;
      while (m->find(st) && U_SUCCESS(st)) {
        const int32_t s = m->start(st), e = m->end(st);
        if (e == s) continue;
        if (s > at) next.emplace_back(cpi[at], cpi[s]);
        next.emplace_back(cpi[s], cpi[e]);
        at = e;
      }
      if (st == U_REGEX_TIME_OUT || st == U_REGEX_STACK_OVERFLOW)
        throw TokenizerError(source_ + ": pre-tokenizer regex '" + step.regex + "' " +
                             (st == U_REGEX_TIME_OUT ? "ran past its step limit" : "ran past its stack limit") + " on a piece of " +
                             std::to_string(b - a) + " UTF-16 units (catastrophic backtracking?)");
      if (U_FAILURE(st)) throw TokenizerError(source_ + ": regex match failed: " + u_errorName(st));
      if (at < b) next.emplace_back(cpi[at], cpi[b]);
    }
    pieces.swap(next);
#endif
  }
  out.reserve(pieces.size());
  for (auto [a, b] : pieces)
    if (t.off[b] > t.off[a]) out.emplace_back(t.off[a], t.off[b]);
}

}  // namespace glassbox::bpe
