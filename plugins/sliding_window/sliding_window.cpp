// Attention "sliding-window:W": a ring buffer of the last W positions (Mistral-style). Writing
// position p overwrites p - W, so each query sees itself and the W - 1 positions before it, and
// generation goes on past W with memory fixed at W slots.
#include <algorithm>
#include <cstring>
#include <vector>

#include <glassbox/error.hpp>
#include <glassbox/plugin.hpp>

namespace {

using glassbox::KvSpan;

class SlidingWindow final : public glassbox::KvStore {
 public:
  SlidingWindow(const glassbox::AttentionShape& shape, int window)
      : sh_(shape), w_(window), first_(shape.n_layers, 0), end_(shape.n_layers, 0) {
    const std::size_t rows = static_cast<std::size_t>(shape.n_layers) * w_ * shape.kv_dim();
    key_.assign(rows, 0.0f);
    value_.assign(rows, 0.0f);
  }

  int capacity() const override { return w_; }
  bool evicts() const override { return true; }

  void write(int layer, int pos, int n, const float* k, const float* v) override {
    if (pos != end_[layer])
      throw glassbox::InputError("attention 'sliding-window': write at position " + std::to_string(pos) + " of layer " +
                                 std::to_string(layer) + " (expected " + std::to_string(end_[layer]) + ")");
    const std::size_t kvd = sh_.kv_dim();
    for (int t = 0; t < n; ++t) {
      std::memcpy(slot(key_, layer, pos + t), k + t * kvd, kvd * sizeof(float));
      std::memcpy(slot(value_, layer, pos + t), v + t * kvd, kvd * sizeof(float));
    }
    end_[layer] = pos + n;
    const int first = std::max(first_[layer], end_[layer] - w_);
    if (layer == sh_.n_layers - 1) evicted_ += first - first_[layer];
    first_[layer] = first;
  }

  void view(int layer, std::vector<KvSpan>& out) override {
    // Held: first .. end-1, at most two runs of the ring (before and after the wrap).
    const int end = end_[layer], first = first_[layer];
    for (int p = first; p < end;) {
      const int run = std::min(end - p, w_ - p % w_);
      out.push_back({slot(key_, layer, p), slot(value_, layer, p), p, run});
      p += run;
    }
  }

  void remove(int p0, int p1) override {
    // Rare (context shift): rebuild the ring from the kept rows in their new positions.
    const std::size_t kvd = sh_.kv_dim();
    std::vector<float> k, v;
    for (int l = 0; l < sh_.n_layers; ++l) {
      const int end = end_[l], first = first_[l];
      const int a = std::clamp(p0, first, end), b = std::clamp(p1, first, end);
      const int d = p1 - p0;
      k.assign(static_cast<std::size_t>(end - first) * kvd, 0.0f);
      v.assign(k.size(), 0.0f);
      for (int p = first; p < end; ++p) {
        std::memcpy(&k[(p - first) * kvd], slot(key_, l, p), kvd * sizeof(float));
        std::memcpy(&v[(p - first) * kvd], slot(value_, l, p), kvd * sizeof(float));
      }
      // kept: [first, a) stays, [b, end) moves to [b - d, end - d); positions below p1 that were
      // already out of the window simply renumber with the rest
      for (int p = first; p < end; ++p) {
        if (p >= a && p < b) continue;
        const int np = p >= p1 ? p - d : p;
        std::memcpy(slot(key_, l, np), &k[(p - first) * kvd], kvd * sizeof(float));
        std::memcpy(slot(value_, l, np), &v[(p - first) * kvd], kvd * sizeof(float));
      }
      first_[l] = first < p0 ? first : first < p1 ? p0 : first - d;
      end_[l] = std::max(first_[l], end <= p0 ? end : end < p1 ? p0 : end - d);
      if (l == sh_.n_layers - 1) evicted_ += b - a;
    }
  }

  void clear() override {
    std::fill(first_.begin(), first_.end(), 0);
    std::fill(end_.begin(), end_.end(), 0);
    evicted_ = 0;
  }

  void describe(glassbox::KvState& s) const override {
    s.block_size = s.blocks_used = s.blocks_free = s.last_block_unused = 0;
    s.block_table.clear();
    s.tokens = end_.back() - first_.back();
    s.capacity = w_;
    s.bytes = static_cast<std::int64_t>((key_.size() + value_.size()) * sizeof(float));
    s.first_pos = first_.back();
    s.evicted = evicted_;
  }

 private:
  float* slot(std::vector<float>& m, int layer, int pos) {
    return m.data() + (static_cast<std::size_t>(layer) * w_ + pos % w_) * sh_.kv_dim();
  }
  glassbox::AttentionShape sh_;
  int w_;
  // Per layer: positions first .. end-1 are held (end - first <= W).
  std::vector<int> first_, end_;
  std::int64_t evicted_ = 0;  // positions that slid out of the window or were removed
  std::vector<float> key_, value_;  // (n_layers, W, kv_dim), position p in slot p mod W
};

void register_factories(glassbox::Registrar& r) {
  r.add_attention({"sliding-window",
                   "ring buffer of the last W positions: each query sees itself and the W-1 before it",
                   {{"window", glassbox::ParamType::Int, "4096", "positions kept (W)", 1.0, {}}},
                   "window"},
                  [](const glassbox::Params& p, const glassbox::PluginContext& c) {
                    const auto& s = c.shape("attention 'sliding-window'");
                    const auto w = std::min<std::int64_t>(p.get_int("window"), s.seq_len);
                    return std::make_unique<SlidingWindow>(s, static_cast<int>(w));
                  });
}

}  // namespace

GLASSBOX_MODULE("sliding-window", "sliding-window attention over the last W positions", register_factories)
