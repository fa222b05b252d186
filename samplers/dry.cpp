// Sampler "dry" ("don't repeat yourself", as llama.cpp's llama_sampler_init_dry, after koboldcpp): a
// token that would extend a sequence already seen in the context, repeated n tokens long, loses
// multiplier · base^(n − allowed_length) from its logit. Sequence breakers (strings such as "\n" or
// ":") cut the repeat that is looked for: a repeat never reaches back across one.
#include <cstring>
#include <unordered_map>

#include <glassbox/tokenizer.hpp>

#include "stage.hpp"

namespace {

using namespace glassbox;

constexpr std::size_t kMaxBreakerChars = 40;  // llama.cpp's limits: longer breakers are cut,
constexpr std::size_t kMaxBreakerTail = 20;   // and a breaker's tokens after the first are at most 20

// "\n|:|\"|*" -> {"\n", ":", "\"", "*"}: items separated by '|'; \n \t \r \\ \| are escapes.
std::vector<std::string> parse_breakers(const std::string& text) {
  std::vector<std::string> out(1);
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '|') {
      out.emplace_back();
    } else if (c == '\\') {
      if (i + 1 == text.size())
        throw samplers::invalid("dry", "breakers", text, "ends in a lone '\\' (escapes: \\n \\t \\r \\\\ \\|)");
      const char e = text[++i];
      switch (e) {
        case 'n': out.back() += '\n'; break;
        case 't': out.back() += '\t'; break;
        case 'r': out.back() += '\r'; break;
        case '\\': out.back() += '\\'; break;
        case '|': out.back() += '|'; break;
        default:
          throw samplers::invalid("dry", "breakers", text,
                                  std::string("has an unknown escape '\\") + e + "' (escapes: \\n \\t \\r \\\\ \\|)");
      }
    } else {
      out.back() += c;
    }
  }
  std::erase_if(out, [](const std::string& s) { return s.empty(); });  // as llama.cpp, empty ones are skipped
  for (auto& s : out)
    if (s.size() > kMaxBreakerChars) s.resize(kMaxBreakerChars);
  return out;
}

class Dry final : public samplers::Stage {
 public:
  Dry(Params p, double multiplier, double base, std::int64_t allowed, std::int64_t last_n, std::vector<std::string> breakers)
      : Stage("dry", std::move(p)),
        multiplier_(static_cast<float>(multiplier)),
        base_(static_cast<float>(base)),
        allowed_(static_cast<int>(allowed)),
        last_n_(last_n),
        breakers_text_(std::move(breakers)) {}

  // Each breaker becomes (head token, tail tokens) pairs, as llama.cpp's get_overlapping_token_sequences
  // builds them: every token whose text contains the breaker is a breaker on its own (empty tail); a
  // token whose text ends with the breaker's beginning is a head, followed by the rest of the breaker
  // as the vocabulary encodes it.
  void bind(const Tokenizer& vocab) override {
    heads_.clear();
    bound_ = true;
    if (!enabled()) return;
    const std::int32_t prev = vocab.bos_id() >= 0 ? vocab.bos_id() : -1;
    std::vector<std::string> words(static_cast<std::size_t>(vocab.vocab_size()));
    for (std::int32_t id = 0; id < vocab.vocab_size(); ++id) words[id] = std::string(prev >= 0 ? vocab.decode(prev, id) : vocab.piece(id));
    for (const auto& str : breakers_text_) {
      for (std::int32_t id = 0; id < vocab.vocab_size(); ++id) {
        const std::string& word = words[id];
        if (word.find(str) != std::string::npos) {
          add(id, {});
          continue;
        }
        // Positions where the breaker's first character occurs and the rest of the word matches the
        // breaker's beginning (the breaker runs past the word's end).
        for (std::size_t pos = word.find(str[0]); pos != std::string::npos; pos = word.find(str[0], pos + 1)) {
          std::size_t i = 1;
          bool match = true;
          for (; i < str.size() && pos + i < word.size(); ++i)
            if (word[pos + i] != str[i]) { match = false; break; }
          if (!match) continue;
          std::vector<std::int32_t> tail = vocab.encode(str.substr(i), false, false);
          if (tail.size() > kMaxBreakerTail) tail.resize(kMaxBreakerTail);
          add(id, std::move(tail));
        }
      }
    }
  }

  void accept(std::int32_t token) override {
    if (!enabled()) return;
    tokens_.push_back(token);
    // A bounded window keeps at most 2·last_n tokens, dropping the older half at once.
    if (last_n_ > 0 && tokens_.size() >= 2 * static_cast<std::size_t>(last_n_))
      tokens_.erase(tokens_.begin(), tokens_.end() - last_n_);
  }
  void reset() override { tokens_.clear(); }

  void apply(Candidates& c, Rng&) override {
    if (!enabled()) return;
    if (!bound_ && !breakers_text_.empty())
      throw ConfigError("sampler 'dry': its sequence breakers need the vocabulary, and none was given to the chain");
    const std::size_t avail = last_n_ > 0 ? std::min(tokens_.size(), static_cast<std::size_t>(last_n_)) : tokens_.size();
    const int n = static_cast<int>(avail);
    if (n <= allowed_) return;
    // rat(i): the i-th most recent token (0 = the last one).
    auto rat = [&](int i) { return tokens_[tokens_.size() - 1 - static_cast<std::size_t>(i)]; };

    // 1. The nearest breaker, going back from the end, limits how long a repeat may be.
    int rep_limit = n;
    for (int i = 0; i < n; ++i) {
      auto [lo, hi] = heads_.equal_range(rat(i));
      if (lo == hi) continue;
      int longest = -1;
      for (auto it = lo; it != hi; ++it) {
        const int len = static_cast<int>(it->second.size());  // the breaker's tokens after its head
        if (len > longest && len <= i) {
          bool match = true;
          for (int k = 0; k < len && match; ++k) match = it->second[k] == rat(i - k - 1);
          if (match) longest = len;
        }
      }
      if (longest >= 0) {
        rep_limit = i - longest;
        break;
      }
    }
    if (rep_limit < allowed_) return;

    // 2. repeat[last - k] = how many of the most recent tokens also end k tokens earlier (a Z-array
    //    of the reversed window, capped at rep_limit); linear time.
    repeat_.assign(static_cast<std::size_t>(n), 0);
    {
      const int last = n - 1;
      int lt = 0, rt = 0;
      for (int k = 1; k < n; ++k) {
        if (k > rt) {
          int len = 0;
          while (len + k < n && rat(len) == rat(len + k)) ++len;
          repeat_[last - k] = std::min(len, rep_limit);
          if (len > 0) lt = k, rt = k + len - 1;
        } else {
          const int pair = k - lt, right = rt - k + 1;
          if (repeat_[last - pair] < right) {
            repeat_[last - k] = std::min(repeat_[last - pair], rep_limit);
          } else {
            int i = rt + 1;
            while (i < n && rat(i) == rat(i - k)) ++i;
            repeat_[last - k] = std::min(i - k, rep_limit);
            lt = k, rt = i - 1;
          }
        }
      }
    }

    // 3. The token that followed each repeat long enough would extend it: remember the longest per token.
    longest_.clear();
    for (int i = 0; i < n - 1; ++i) {
      const int len = repeat_[i];
      if (len < allowed_) continue;
      const std::int32_t next = rat(n - 2 - i);
      auto it = longest_.find(next);
      if (it == longest_.end()) longest_.emplace(next, len);
      else it->second = std::max(it->second, len);
    }
    if (longest_.empty()) return;

    // 4. The penalty, with the exponent capped so that base^exp stays a float.
    int max_exp = 0;
    if (base_ > 1.000001f) max_exp = static_cast<int>(88.7228391f / std::log(base_));
    for (auto& x : c.data) {
      auto it = longest_.find(x.id);
      if (it == longest_.end()) continue;
      bool breaker = false;  // a token that is a breaker on its own is never penalised
      auto [lo, hi] = heads_.equal_range(x.id);
      for (auto h = lo; h != hi && !breaker; ++h) breaker = h->second.empty();
      if (breaker) continue;
      int e = it->second - allowed_;
      if (max_exp > 0 && e > max_exp) e = max_exp;
      x.logit -= multiplier_ * std::pow(base_, static_cast<float>(e));
    }
    c.sorted = false;
  }

  std::string noop_reason() const override {
    if (multiplier_ == 0.0f) return "multiplier = 0 (off, its default); e.g. dry:multiplier=0.8 turns it on";
    if (last_n_ == 0) return "last_n = 0 looks at no tokens; e.g. dry:multiplier=0.8;last_n=-1 (the whole context) turns it on";
    return {};
  }

 private:
  bool enabled() const { return multiplier_ != 0.0f && last_n_ != 0; }
  void add(std::int32_t head, std::vector<std::int32_t> tail) {
    auto [lo, hi] = heads_.equal_range(head);
    for (auto it = lo; it != hi; ++it)
      if (it->second == tail) return;
    heads_.emplace(head, std::move(tail));
  }

  float multiplier_, base_;
  int allowed_;
  std::int64_t last_n_;
  std::vector<std::string> breakers_text_;
  bool bound_ = false;
  std::unordered_multimap<std::int32_t, std::vector<std::int32_t>> heads_;  // breaker head -> tail tokens
  std::vector<std::int32_t> tokens_;                                         // accepted tokens (the window's end)
  std::vector<int> repeat_;                                                  // step 2's array, reused
  std::unordered_map<std::int32_t, int> longest_;                            // step 3: token -> longest repeat it extends
};

void register_factories(Registrar& r) {
  r.add_sampler(
      {"dry", "don't repeat yourself: logit - multiplier * base^(n - allowed_length) for a token extending an n-token repeat",
       {{"multiplier", ParamType::Float, "0.0", "strength, >= 0; 0 = off", 0.0, std::nullopt},
        {"base", ParamType::Float, "1.75", "growth per extra repeated token, >= 1", 1.0, std::nullopt},
        {"allowed_length", ParamType::Int, "2", "repeats up to this long go unpenalised, >= 0", 0.0, std::nullopt},
        {"last_n", ParamType::Int, "-1", "look-back window in tokens (prompt included); -1 = whole context, 0 = off", -1.0,
         std::nullopt},
        {"breakers", ParamType::String, "\\n|:|\"|*",
         "sequence breakers separated by '|' (escapes \\n \\t \\r \\\\ \\|); empty = none", std::nullopt, std::nullopt}},
       "multiplier"},
      [](const Params& p, const PluginContext&) {
        const double m = samplers::finite_param("dry", p, "multiplier");
        const double b = samplers::finite_param("dry", p, "base");
        const std::int64_t allowed = p.get_int("allowed_length"), last_n = p.get_int("last_n");
        if (m < 0) throw samplers::invalid("dry", "multiplier", m, "is negative (expected multiplier >= 0)");
        if (b < 1) throw samplers::invalid("dry", "base", b, "is below 1 (expected base >= 1)");
        if (allowed < 0) throw samplers::invalid("dry", "allowed_length", allowed, "is negative (expected allowed_length >= 0)");
        if (last_n < -1) throw samplers::invalid("dry", "last_n", last_n, "is below -1 (expected last_n >= -1)");
        return std::make_unique<Dry>(p, m, b, allowed, last_n, parse_breakers(p.get_string("breakers")));
      });
}

}  // namespace

GLASSBOX_MODULE("dry", "DRY repetition penalty", register_factories)
