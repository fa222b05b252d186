// GBNF parsing and the stack-based recognizer behind the "grammar" sampler stage. The encoding, the
// repetition rewriting and the rejection walk follow llama.cpp's llama-grammar (so a grammar means the
// same here as there); the code is glassbox's own.
#include "grammar_engine.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <limits>
#include <unordered_set>

#include <glassbox/error.hpp>
#include <glassbox/interrupt_flag.hpp>

namespace glassbox::grammar {

namespace {

constexpr std::size_t npos = std::string::npos;

bool is_word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'; }

std::string show_char(char c) {
  if (c == '\n') return "a newline";
  if (c == '\r') return "a carriage return";
  if (static_cast<unsigned char>(c) < 0x20) return "a control character";
  return std::string("'") + c + "'";
}

class Parser {
 public:
  Parser(std::string_view src, std::string source, const Limits& limits)
      : src_(src), source_(std::move(source)), kMaxElements(limits.max_elements), kMaxRules(limits.max_rules) {}

  Grammar run() {
    space(true);
    if (at_end()) throw ConfigError(source_ + ": the grammar is empty (expected rules NAME ::= ..., one of them 'root')");
    while (!at_end()) rule();
    for (std::size_t id = 0; id < g_.rules.size(); ++id)
      if (!defined_[id]) fail(first_use_[id], "undefined rule '" + g_.names[id] + "' (no line defines it with " + g_.names[id] + " ::= ...)");
    const auto root = ids_.find("root");
    if (root == ids_.end())
      throw ConfigError(source_ + ": no rule 'root' (the grammar starts there: root ::= ...)");
    g_.root = root->second;
    std::size_t total = 0;
    for (const auto& r : g_.rules) total += r.size();
    if (total > kMaxElements)
      throw ConfigError(source_ + ": the grammar has " + std::to_string(total) + " elements once its repetitions are written out (the limit is " +
                        std::to_string(kMaxElements) + ")");
    check_left_recursion();
    return std::move(g_);
  }

 private:
  [[noreturn]] void fail(std::size_t at, const std::string& what) const {
    at = std::min(at, src_.size());
    std::size_t line = 1, line_start = 0;
    for (std::size_t i = 0; i < at; ++i)
      if (src_[i] == '\n') ++line, line_start = i + 1;
    throw ConfigError(source_ + ":" + std::to_string(line) + ":" + std::to_string(at - line_start + 1) + ": " + what);
  }
  std::string where(std::size_t at) const {
    std::size_t line = 1, line_start = 0;
    for (std::size_t i = 0; i < at && i < src_.size(); ++i)
      if (src_[i] == '\n') ++line, line_start = i + 1;
    return std::to_string(line) + ":" + std::to_string(at - line_start + 1);
  }
  bool at_end() const { return pos_ >= src_.size(); }
  char peek(std::size_t k = 0) const { return pos_ + k < src_.size() ? src_[pos_ + k] : '\0'; }
  std::string found() const { return at_end() ? "the end of the file" : show_char(peek()); }

  // Blanks and # comments; newlines too where a rule may go on (inside parentheses, after ::= and |).
  void space(bool newline_ok) {
    while (!at_end()) {
      const char c = peek();
      if (c == ' ' || c == '\t') {
        ++pos_;
      } else if (c == '#') {
        while (!at_end() && peek() != '\n' && peek() != '\r') ++pos_;
      } else if (newline_ok && (c == '\n' || c == '\r')) {
        ++pos_;
      } else {
        break;
      }
    }
  }

  void count_rule(std::size_t at) {
    if (g_.rules.size() >= kMaxRules)
      fail(at, "the grammar grows past " + std::to_string(kMaxRules) + " rules once its groups and repetitions are written out (the limit on rules)");
  }
  std::uint32_t symbol(const std::string& name, std::size_t used_at) {
    auto [it, fresh] = ids_.emplace(name, static_cast<std::uint32_t>(g_.rules.size()));
    if (fresh) {
      count_rule(used_at == npos ? pos_ : used_at);
      g_.rules.emplace_back();
      g_.names.push_back(name);
      first_use_.push_back(npos);
      defined_.push_back(false);
    }
    if (used_at != npos && first_use_[it->second] == npos) first_use_[it->second] = used_at;
    return it->second;
  }
  // A rule made for a group or a repetition inside rule `base`.
  std::uint32_t generated(const std::string& base) {
    count_rule(pos_);
    const auto id = static_cast<std::uint32_t>(g_.rules.size());
    g_.rules.emplace_back();
    g_.names.push_back(base + "-" + std::to_string(id));
    first_use_.push_back(npos);
    defined_.push_back(true);
    return id;
  }

  std::uint32_t hex(std::size_t digits) {
    std::uint32_t v = 0;
    for (std::size_t i = 0; i < digits; ++i) {
      const char c = peek();
      int d = -1;
      if (c >= '0' && c <= '9') d = c - '0';
      else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
      if (d < 0) fail(pos_, "expected " + std::to_string(digits) + " hexadecimal digits in the escape, found " + found());
      v = v * 16 + static_cast<std::uint32_t>(d);
      ++pos_;
    }
    return v;
  }

  // One character of a literal or class: an escape or one UTF-8 encoded code point.
  std::uint32_t character() {
    const std::size_t at = pos_;
    if (peek() == '\\') {
      ++pos_;
      const char e = peek();
      ++pos_;
      switch (e) {
        case 'x': return hex(2);
        case 'u':
        case 'U': {
          // A code point must be a Unicode scalar value: no surrogate, nothing past U+10FFFF.
          const std::uint32_t v = hex(e == 'u' ? 4 : 8);
          if ((v >= 0xD800 && v <= 0xDFFF) || v > 0x10FFFF)
            fail(at, "escape '" + std::string(src_.substr(at, pos_ - at)) + "' is not a Unicode character (a surrogate, or past U+10FFFF)");
          return v;
        }
        case 't': return '\t';
        case 'r': return '\r';
        case 'n': return '\n';
        case '\\': case '"': case '[': case ']': case '-': case '^': case '/': return static_cast<unsigned char>(e);
        default:
          fail(at, "unknown escape '\\" + std::string(e ? 1 : 0, e) +
                       "' (known: \\xHH \\uHHHH \\UHHHHHHHH \\t \\r \\n \\\\ \\\" \\[ \\] \\- \\^)");
      }
    }
    const auto [cps, partial] = decode_utf8(src_.substr(pos_, std::min<std::size_t>(4, src_.size() - pos_)), {});
    if (cps.size() < 2 || cps[0] == 0) fail(at, "invalid UTF-8 in the grammar text (or a byte sequence that is no Unicode character)");
    const auto b = static_cast<unsigned char>(peek());
    pos_ += b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
    return cps[0];
  }

  std::uint64_t number() {
    const std::size_t at = pos_;
    std::uint64_t v = 0;
    while (std::isdigit(static_cast<unsigned char>(peek()))) {
      v = v * 10 + static_cast<std::uint64_t>(peek() - '0');
      if (v > 100000) fail(at, "repetition count over 100000");
      ++pos_;
    }
    if (pos_ == at) fail(at, "expected a number in the repetition {m,n}, found " + found());
    return v;
  }

  // x{min,max} (max < 0: unbounded) as llama.cpp rewrites it: min copies of x, then a chain of
  // generated rules each of which is x followed by the next, or nothing.
  void repeat(const std::string& rule_name, Rule& out, std::size_t last_sym_start, int min, int max, std::size_t at) {
    if (last_sym_start == out.size()) fail(at, "expected an element before " + show_char(src_[at]) + " to repeat");
    const Rule prev(out.begin() + static_cast<std::ptrdiff_t>(last_sym_start), out.end());
    // Repetitions are written out (min copies, then a rule per optional one): bound what that makes.
    const std::size_t copies = static_cast<std::size_t>(min) + static_cast<std::size_t>(max < 0 ? 1 : max - min);
    elements_ += copies * (prev.size() + 3);
    if (elements_ > kMaxElements)
      fail(at, "the grammar grows past " + std::to_string(kMaxElements) + " elements once its repetitions are written out");
    if (min == 0) out.resize(last_sym_start);
    else
      for (int i = 1; i < min; ++i) out.insert(out.end(), prev.begin(), prev.end());
    std::uint32_t last_rec = 0;
    const int n_opt = max < 0 ? 1 : max - min;
    for (int i = 0; i < n_opt; ++i) {
      Rule rec = prev;
      const std::uint32_t id = generated(rule_name);
      if (i > 0 || max < 0) rec.push_back({Type::RuleRef, max < 0 ? id : last_rec});
      rec.push_back({Type::Alt, 0});
      rec.push_back({Type::End, 0});
      g_.rules[id] = std::move(rec);
      last_rec = id;
    }
    if (n_opt > 0) out.push_back({Type::RuleRef, last_rec});
  }

  void sequence(const std::string& rule_name, Rule& out, bool nested) {
    std::size_t last_sym_start = out.size();
    while (!at_end()) {
      const char c = peek();
      const std::size_t at = pos_;
      if (c == '"') {
        ++pos_;
        last_sym_start = out.size();
        while (peek() != '"') {
          if (at_end() || peek() == '\n') fail(at, "unterminated string literal (expected a closing '\"' on the same line)");
          out.push_back({Type::Char, character()});
        }
        ++pos_;
      } else if (c == '[') {
        ++pos_;
        Type first = Type::Char;
        if (peek() == '^') {
          ++pos_;
          first = Type::CharNot;
        }
        last_sym_start = out.size();
        while (peek() != ']') {
          if (at_end() || peek() == '\n') fail(at, "unterminated character class (expected a closing ']' on the same line)");
          const std::uint32_t lo = character();
          out.push_back({last_sym_start < out.size() ? Type::CharAlt : first, lo});
          if (peek() == '-' && peek(1) != ']' && peek(1) != '\0') {
            ++pos_;
            const std::size_t hi_at = pos_;
            const std::uint32_t hi = character();
            if (hi < lo) fail(hi_at, "character range ends before it starts");
            out.push_back({Type::CharRngUpper, hi});
          }
        }
        if (last_sym_start == out.size()) fail(at, "empty character class []");
        ++pos_;
      } else if (is_word_char(c)) {
        while (is_word_char(peek())) ++pos_;
        const std::string name(src_.substr(at, pos_ - at));
        last_sym_start = out.size();
        out.push_back({Type::RuleRef, symbol(name, at)});
      } else if (c == '(') {
        if (++depth_ > kMaxDepth) fail(at, "groups nested more than " + std::to_string(kMaxDepth) + " deep");
        ++pos_;
        space(true);
        const std::uint32_t sub = generated(rule_name);
        alternates(rule_name, sub, true);
        last_sym_start = out.size();
        out.push_back({Type::RuleRef, sub});
        if (peek() != ')') fail(pos_, "expected ')' to close the group opened at " + where(at) + ", found " + found());
        ++pos_;
        --depth_;
      } else if (c == '.') {
        ++pos_;
        last_sym_start = out.size();
        out.push_back({Type::CharAny, 0});
      } else if (c == '*' || c == '+' || c == '?') {
        ++pos_;
        repeat(rule_name, out, last_sym_start, c == '+' ? 1 : 0, c == '?' ? 1 : -1, at);
      } else if (c == '{') {
        ++pos_;
        space(false);
        const auto min = static_cast<int>(number());
        space(false);
        int max = min;
        if (peek() == ',') {
          ++pos_;
          space(false);
          max = std::isdigit(static_cast<unsigned char>(peek())) ? static_cast<int>(number()) : -1;
          space(false);
        }
        if (peek() != '}') fail(pos_, "expected '}' to close the repetition {m,n}, found " + found());
        ++pos_;
        if (max >= 0 && max < min) fail(at, "repetition {" + std::to_string(min) + "," + std::to_string(max) + "} has max < min");
        repeat(rule_name, out, last_sym_start, min, max, at);
      } else {
        break;
      }
      space(nested);
    }
  }

  void alternates(const std::string& rule_name, std::uint32_t id, bool nested) {
    Rule r;
    sequence(rule_name, r, nested);
    while (peek() == '|') {
      r.push_back({Type::Alt, 0});
      ++pos_;
      space(true);
      sequence(rule_name, r, nested);
    }
    r.push_back({Type::End, 0});
    g_.rules[id] = std::move(r);
  }

  void rule() {
    const std::size_t at = pos_;
    if (!is_word_char(peek())) fail(at, "expected a rule name (letters, digits, '-'), found " + found());
    while (is_word_char(peek())) ++pos_;
    const std::string name(src_.substr(at, pos_ - at));
    space(false);
    if (src_.substr(pos_, 3) != "::=") fail(pos_, "expected '::=' after the rule name '" + name + "', found " + found());
    pos_ += 3;
    space(true);
    const std::uint32_t id = symbol(name, npos);
    if (defined_[id]) fail(at, "rule '" + name + "' is defined twice");
    defined_[id] = true;
    alternates(name, id, false);
    if (peek() == '\r') ++pos_;
    if (peek() == '\n') ++pos_;
    else if (!at_end())
      fail(pos_, "expected an element (\"literal\", [class], rule name, '(', '.'), '|', a repetition or the end of the line, found " + found());
    space(true);
  }

  // A rule that can reach itself before matching any character would loop forever in the recognizer.
  void check_left_recursion() const {
    const std::size_t n = g_.rules.size();
    std::vector<bool> nullable(n, false);
    for (bool changed = true; changed;) {
      changed = false;
      for (std::size_t id = 0; id < n; ++id) {
        if (nullable[id]) continue;
        bool alt_nullable = true, any = false;  // this alternative so far; some alternative
        for (const Element& e : g_.rules[id]) {
          if (e.type == Type::Alt || e.type == Type::End) {
            any = any || alt_nullable;
            alt_nullable = true;
            continue;
          }
          if (e.type != Type::RuleRef || !nullable[e.value]) alt_nullable = false;
        }
        if (any) nullable[id] = changed = true;
      }
    }
    std::vector<std::vector<std::uint32_t>> left(n);  // rules each rule may start with
    for (std::size_t id = 0; id < n; ++id) {
      bool open = true;
      for (const Element& e : g_.rules[id]) {
        if (e.type == Type::Alt || e.type == Type::End) {
          open = true;
          continue;
        }
        if (!open) continue;
        if (e.type == Type::RuleRef) {
          left[id].push_back(e.value);
          open = nullable[e.value];
        } else if (e.type != Type::CharAlt && e.type != Type::CharRngUpper) {
          open = false;
        }
      }
    }
    std::vector<int> state(n, 0);  // 0 new, 1 on the path, 2 done
    // Depth-first, with an explicit stack (a chain of 100,000 rules must not overflow the call stack).
    std::vector<std::uint32_t> path;      // rules on the current path
    std::vector<std::size_t> next_edge;   // per path entry: the next of its edges to follow
    for (std::uint32_t start = 0; start < n; ++start) {
      if (state[start] != 0) continue;
      state[start] = 1;
      path.push_back(start);
      next_edge.push_back(0);
      while (!path.empty()) {
        const std::uint32_t id = path.back();
        if (next_edge.back() == left[id].size()) {
          state[id] = 2;
          path.pop_back();
          next_edge.pop_back();
          continue;
        }
        const std::uint32_t next = left[id][next_edge.back()++];
        if (state[next] == 1) {
          std::string cycle;
          for (auto it = std::find(path.begin(), path.end(), next); it != path.end(); ++it) cycle += g_.names[*it] + " -> ";
          throw ConfigError(source_ + ": rule '" + g_.names[next] + "' is left-recursive (" + cycle + g_.names[next] +
                            " before any character): rewrite it with repetition, e.g. x ::= y (\"+\" y)*");
        }
        if (state[next] == 0) {
          state[next] = 1;
          path.push_back(next);
          next_edge.push_back(0);
        }
      }
    }
  }

  static constexpr int kMaxDepth = 1000;                   // groups inside groups
  std::string_view src_;
  std::string source_;
  std::size_t kMaxElements;  // Limits::max_elements
  std::size_t kMaxRules;     // Limits::max_rules
  std::size_t pos_ = 0;
  std::size_t elements_ = 0;  // elements written by repetitions so far
  int depth_ = 0;
  Grammar g_;
  std::map<std::string, std::uint32_t> ids_;
  std::vector<std::size_t> first_use_;
  std::vector<bool> defined_;
};

bool is_end(const Element* p) { return p->type == Type::End || p->type == Type::Alt; }

// Does the character class at `pos` take `chr`? Also returns the element after the class.
std::pair<bool, const Element*> match_char(const Element* pos, std::uint32_t chr) {
  bool found = false;
  const bool positive = pos->type == Type::Char || pos->type == Type::CharAny;
  do {
    if (pos[1].type == Type::CharRngUpper) {
      found = found || (pos->value <= chr && chr <= pos[1].value);
      pos += 2;
    } else if (pos->type == Type::CharAny) {
      found = true;
      pos += 1;
    } else {
      found = found || pos->value == chr;
      pos += 1;
    }
  } while (pos->type == Type::CharAlt);
  return {found == positive, pos};
}

// Could some completion of an unfinished UTF-8 character satisfy the class at `pos`?
bool match_partial_char(const Element* pos, PartialUtf8 partial) {
  const bool positive = pos->type == Type::Char || pos->type == Type::CharAny;
  const int n = partial.n_remain;
  if (n < 0 || (n == 1 && partial.value < 2)) return false;  // invalid, or an overlong 7-bit character
  std::uint32_t low = partial.value << (n * 6);
  const std::uint32_t high = low | ((1u << (n * 6)) - 1);
  if (low == 0) low = n == 2 ? 1u << 11 : n == 3 ? 1u << 16 : low;
  do {
    if (pos[1].type == Type::CharRngUpper) {
      if (pos->value <= high && low <= pos[1].value) return positive;
      pos += 2;
    } else if (pos->type == Type::CharAny) {
      return true;
    } else {
      if (low <= pos->value && pos->value <= high) return positive;
      pos += 1;
    }
  } while (pos->type == Type::CharAlt);
  return !positive;
}

struct StackHash {
  std::size_t operator()(const Stack& s) const noexcept {
    std::size_t h = s.size();
    for (const Element* p : s) h = (h ^ reinterpret_cast<std::uintptr_t>(p)) * 0x100000001B3ull + (h >> 29);
    return h;
  }
};
using StackSet = std::unordered_set<Stack, StackHash>;

// One step's walk: the grammar, its bounds, and the clock. Every expansion ticks; every 1024 ticks the
// wall time and the interrupt flag are checked.
class Walk {
 public:
  Walk(const Grammar& g, const Limits& lim) : g(g), lim(lim), start_(std::chrono::steady_clock::now()) {}
  void tick() {
    if ((++work_ & 1023) == 0) check();
  }
  void check() const {
    if (const int sig = interrupt_flag())
      throw ConfigError("grammar: the walk was interrupted by " + std::string(sig == 2 ? "SIGINT" : sig == 15 ? "SIGTERM" : "a signal"));
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count();
    if (ms > lim.max_step_ms)
      throw ConfigError("grammar: one step's walk took more than " + std::to_string(static_cast<long>(lim.max_step_ms)) +
                        " ms (the limit on time per step): the grammar is too ambiguous to follow");
  }
  void count_stacks(std::size_t n) const {
    if (n > lim.max_stacks)
      throw ConfigError("grammar: more than " + std::to_string(lim.max_stacks) +
                        " parse stacks after one character (the limit on stacks per step): the grammar is too ambiguous to follow");
  }
  const Grammar& g;
  const Limits& lim;

 private:
  std::chrono::steady_clock::time_point start_;
  std::uint64_t work_ = 0;
};

// The stacks one expansion reaches: each once (a hash set, so 100,000 alternatives cost 100,000 steps,
// not their square), and each stack with a rule reference on top expanded once however many paths reach
// it (nested optional repetitions reach the same stack along exponentially many paths).
struct Frontier {
  Stacks out;
  StackSet seen;      // out's stacks
  StackSet expanded;  // stacks with a rule reference on top, already expanded
};

// Expands rule references on top of `stack` until each resulting stack has a character element on
// top (or is empty: complete), adding those not yet in `f.out`.
void advance_stack(Walk& w, Stack stack, Frontier& f) {
  std::vector<Stack> todo;
  todo.push_back(std::move(stack));
  while (!todo.empty()) {
    w.tick();
    Stack s = std::move(todo.back());
    todo.pop_back();
    if (!s.empty() && s.back()->type == Type::RuleRef) {
      if (!f.expanded.insert(s).second) continue;
      w.count_stacks(f.expanded.size());
      const Element* pos = s.back();
      const Element* sub = w.g.rules[pos->value].data();
      for (;;) {
        Stack next(s.begin(), s.end() - 1);
        if (!is_end(pos + 1)) next.push_back(pos + 1);
        if (!is_end(sub)) next.push_back(sub);
        todo.push_back(std::move(next));
        while (!is_end(sub)) ++sub;
        if (sub->type != Type::Alt) break;
        ++sub;
      }
      continue;
    }
    if (f.seen.insert(s).second) {
      f.out.push_back(std::move(s));
      w.count_stacks(f.out.size());
    }
  }
}

Stacks accept_char(Walk& w, const Stacks& stacks, std::uint32_t chr) {
  Frontier f;
  for (const Stack& s : stacks) {
    if (s.empty()) continue;
    const auto [ok, after] = match_char(s.back(), chr);
    if (!ok) continue;
    Stack next(s.begin(), s.end() - 1);
    if (!is_end(after)) next.push_back(after);
    advance_stack(w, std::move(next), f);
  }
  return std::move(f.out);
}

std::vector<TokenText> reject_all(Walk& w, const Stacks& stacks, const std::vector<TokenText>& cands);

std::vector<TokenText> reject_for_stack(Walk& w, const Stack& stack, const std::vector<TokenText>& cands) {
  w.tick();
  std::vector<TokenText> rejects;
  rejects.reserve(cands.size());
  if (stack.empty()) {  // complete on this stack: only a text already at its end fits
    for (const auto& t : cands)
      if (*t.code_points != 0 || t.partial.n_remain != 0) rejects.push_back(t);
    return rejects;
  }
  const Element* pos = stack.back();
  std::vector<TokenText> next;
  for (const auto& t : cands) {
    if (*t.code_points == 0) {
      if (t.partial.n_remain != 0 && !match_partial_char(pos, t.partial)) rejects.push_back(t);
    } else if (match_char(pos, *t.code_points).first) {
      next.push_back({t.index, t.code_points + 1, t.partial});
    } else {
      rejects.push_back(t);
    }
  }
  if (next.empty()) return rejects;
  const Element* after = match_char(pos, 0).second;  // the element after this class
  Stack rest(stack.begin(), stack.end() - 1);
  if (!is_end(after)) rest.push_back(after);
  Frontier f;
  advance_stack(w, std::move(rest), f);
  for (const auto& t : reject_all(w, f.out, next)) rejects.push_back({t.index, t.code_points - 1, t.partial});
  return rejects;
}

std::vector<TokenText> reject_all(Walk& w, const Stacks& stacks, const std::vector<TokenText>& cands) {
  if (stacks.empty()) return cands;
  std::vector<TokenText> rejects = reject_for_stack(w, stacks.front(), cands);
  for (std::size_t i = 1; i < stacks.size() && !rejects.empty(); ++i) rejects = reject_for_stack(w, stacks[i], rejects);
  return rejects;
}

void append_char(std::string& out, std::uint32_t c, bool in_class) {
  switch (c) {
    case '\n': out += "\\n"; return;
    case '\r': out += "\\r"; return;
    case '\t': out += "\\t"; return;
    case '\\': out += "\\\\"; return;
    case '"': if (!in_class) { out += "\\\""; return; } break;
    case ']': case '[': case '-': case '^': if (in_class) { out += '\\'; out += static_cast<char>(c); return; } break;
    default: break;
  }
  if (c < 0x20 || c == 0x7F) {
    static const char* hexd = "0123456789ABCDEF";
    out += "\\x";
    out += hexd[c >> 4];
    out += hexd[c & 15];
  } else if (c < 0x80) {
    out += static_cast<char>(c);
  } else {
    char buf[8];
    int n = 0;
    if (c < 0x800) {
      buf[n++] = static_cast<char>(0xC0 | (c >> 6));
    } else if (c < 0x10000) {
      buf[n++] = static_cast<char>(0xE0 | (c >> 12));
      buf[n++] = static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    } else {
      buf[n++] = static_cast<char>(0xF0 | (c >> 18));
      buf[n++] = static_cast<char>(0x80 | ((c >> 12) & 0x3F));
      buf[n++] = static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    }
    buf[n++] = static_cast<char>(0x80 | (c & 0x3F));
    out.append(buf, static_cast<std::size_t>(n));
  }
}

}  // namespace

Grammar parse(std::string_view text, const std::string& source, const Limits& limits) { return Parser(text, source, limits).run(); }

std::string to_gbnf(const Grammar& g) {
  std::string out;
  for (std::size_t id = 0; id < g.rules.size(); ++id) {
    out += g.names[id] + " ::=";
    const Rule& r = g.rules[id];
    for (std::size_t i = 0; i < r.size(); ++i) {
      const Element& e = r[i];
      // An empty alternative is written "", so that no line ends in '|' (which would go on to the next line).
      if ((e.type == Type::End || e.type == Type::Alt) && (i == 0 || r[i - 1].type == Type::Alt)) out += " \"\"";
      switch (e.type) {
        case Type::End: break;
        case Type::Alt: out += " |"; break;
        case Type::RuleRef: out += " " + g.names[e.value]; break;
        case Type::CharAny: out += " ."; break;
        case Type::Char:
        case Type::CharNot:
          out += e.type == Type::Char ? " [" : " [^";
          append_char(out, e.value, true);
          break;
        case Type::CharAlt: append_char(out, e.value, true); break;
        case Type::CharRngUpper:
          out += '-';
          append_char(out, e.value, true);
          break;
      }
      if ((e.type == Type::Char || e.type == Type::CharNot || e.type == Type::CharAlt || e.type == Type::CharRngUpper) &&
          r[i + 1].type != Type::CharAlt && r[i + 1].type != Type::CharRngUpper)
        out += ']';
    }
    out += '\n';
  }
  return out;
}

namespace {
// Is `b` a valid continuation byte at this point of a character of `length` bytes whose bits so far are
// `value`, `done` bytes of it read? The second byte rules out what is no Unicode scalar value: overlong
// forms (E0 80..9F, F0 80..8F), surrogates (ED A0..BF) and values past U+10FFFF (F4 90..BF).
bool continuation_ok(int length, int done, std::uint32_t value, unsigned char b) {
  if ((b >> 6) != 2) return false;
  if (done != 1) return true;
  if (length == 3 && value == 0x0 && b < 0xA0) return false;
  if (length == 3 && value == 0xD && b >= 0xA0) return false;
  if (length == 4 && value == 0x0 && b < 0x90) return false;
  if (length == 4 && value == 0x4 && b >= 0x90) return false;
  return true;
}
}  // namespace

std::pair<std::vector<std::uint32_t>, PartialUtf8> decode_utf8(std::string_view src, PartialUtf8 start) {
  static const int kLength[] = {1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 2, 2, 3, 4};  // by the first byte's high nibble
  std::vector<std::uint32_t> cps;
  cps.reserve(src.size() + 1);
  std::size_t i = 0;
  std::uint32_t value = start.value;
  int n_remain = start.n_remain;
  int length = start.length;
  if (n_remain > 0 && (length < 2 || length > 4 || n_remain >= length)) return {{0}, {0, -1, 0}};
  while (i < src.size() && n_remain > 0) {  // finish the character the previous text began
    const auto b = static_cast<unsigned char>(src[i]);
    if (!continuation_ok(length, length - n_remain, value, b)) return {{0}, {0, -1, 0}};
    value = (value << 6) + (b & 0x3F);
    ++i;
    --n_remain;
  }
  if (start.n_remain > 0 && n_remain == 0) cps.push_back(value);
  while (i < src.size()) {
    const auto b = static_cast<unsigned char>(src[i]);
    length = kLength[b >> 4];
    n_remain = length - 1;
    if (n_remain < 0) return {{0}, {0, -1, 0}};
    value = b & ((1u << (7 - n_remain)) - 1);
    // C0 and C1 lead only overlong forms; F5..FF values past U+10FFFF (or no UTF-8 at all).
    if ((length == 2 && value < 2) || (length == 4 && value > 4)) return {{0}, {0, -1, 0}};
    ++i;
    while (i < src.size() && n_remain > 0) {
      const auto c = static_cast<unsigned char>(src[i]);
      if (!continuation_ok(length, length - n_remain, value, c)) return {{0}, {0, -1, 0}};
      value = (value << 6) + (c & 0x3F);
      ++i;
      --n_remain;
    }
    if (n_remain == 0) cps.push_back(value);
  }
  cps.push_back(0);
  return {std::move(cps), {n_remain > 0 ? value : 0, n_remain, n_remain > 0 ? length : 0}};
}

Recognizer::Recognizer(const Grammar& g, const Limits& limits) : g_(g), limits_(limits) { reset(); }

void Recognizer::reset() {
  stacks_.clear();
  partial_ = {};
  Walk w(g_, limits_);
  Frontier f;
  const Element* start = g_.rules[g_.root].data();
  for (;;) {
    Stack s;
    if (!is_end(start)) s.push_back(start);
    advance_stack(w, std::move(s), f);
    while (!is_end(start)) ++start;
    if (start->type != Type::Alt) break;
    ++start;
  }
  stacks_ = std::move(f.out);
}

bool Recognizer::complete() const {
  return std::any_of(stacks_.begin(), stacks_.end(), [](const Stack& s) { return s.empty(); });
}

bool Recognizer::accept_text(std::string_view text) {
  const auto [cps, partial] = decode_utf8(text, partial_);
  if (partial.n_remain < 0) return false;
  Walk w(g_, limits_);
  Stacks stacks = stacks_;
  for (std::size_t i = 0; cps[i] != 0; ++i) {
    stacks = accept_char(w, stacks, cps[i]);
    if (stacks.empty()) return false;
  }
  const auto tail = partial;  // (a lambda may not capture a structured binding before C++20's P1091 in clang 14)
  if (tail.n_remain > 0 &&
      std::none_of(stacks.begin(), stacks.end(), [&](const Stack& s) { return !s.empty() && match_partial_char(s.back(), tail); }))
    return false;
  stacks_ = std::move(stacks);
  partial_ = partial;
  return true;
}

std::vector<TokenText> Recognizer::reject(const std::vector<TokenText>& candidates) const {
  Walk w(g_, limits_);
  return reject_all(w, stacks_, candidates);
}

}  // namespace glassbox::grammar
