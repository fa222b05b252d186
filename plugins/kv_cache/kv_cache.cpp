// Attention "kv-cache": the classic contiguous K/V cache, one slot per position, allocated up front.
#include <cmath>
#include <string>

#include <xtensor/xtensor.hpp>

#include <glassbox/error.hpp>
#include <glassbox/kernels.hpp>
#include <glassbox/plugin.hpp>

namespace {

using glassbox::kernels::axpy;
using glassbox::kernels::dot;
using glassbox::kernels::softmax;

class KvCache final : public glassbox::Attention {
 public:
  KvCache(const glassbox::AttentionShape& shape, const glassbox::Params& p) : sh_(shape) {
    const auto cap = p.get_int("capacity");
    capacity_ = cap == 0 ? shape.seq_len : static_cast<int>(cap);
    if (capacity_ > shape.seq_len)
      throw glassbox::ConfigError("attention 'kv-cache': capacity = " + std::to_string(cap) +
                                  " exceeds the model's context length " + std::to_string(shape.seq_len));
    const std::size_t L = shape.n_layers, C = capacity_, kvd = shape.kv_dim();
    key_ = xt::zeros<float>({L, C, kvd});
    value_ = xt::zeros<float>({L, C, kvd});
    scores_ = xt::zeros<float>({C});
  }

  void forward(int layer, int pos, int n, std::span<const float> q, std::span<const float> k,
               std::span<const float> v, std::span<float> out) override {
    const int hs = sh_.head_size, qd = sh_.q_dim(), kvd = sh_.kv_dim();
    const int group = sh_.n_heads / sh_.n_kv_heads;  // query heads per kv head
    if (pos < 0 || pos > held_)
      throw glassbox::InputError("attention 'kv-cache': position " + std::to_string(pos) + " leaves a gap after the " +
                                 std::to_string(held_) + " positions held");
    if (pos + n > capacity_)
      throw glassbox::InputError("attention 'kv-cache': position " + std::to_string(pos + n - 1) +
                                 " is beyond its capacity of " + std::to_string(capacity_) + " positions");
    // K[layer, pos+t] = k_t,  V[layer, pos+t] = v_t
    for (int t = 0; t < n; ++t) {
      std::copy_n(&k[t * kvd], kvd, &key_(layer, pos + t, 0));
      std::copy_n(&v[t * kvd], kvd, &value_(layer, pos + t, 0));
    }
    const float inv_sqrt = 1.0f / std::sqrt(static_cast<float>(hs));
    for (int t = 0; t < n; ++t) {
      const int last = pos + t;  // causal: position t sees 0..last
      for (int h = 0; h < sh_.n_heads; ++h) {
        const float* qh = &q[t * qd + h * hs];
        const int kvo = (h / group) * hs;
        // a_s = q·k_s / √head_size,  s = 0..last
        for (int s = 0; s <= last; ++s) scores_(s) = dot(qh, &key_(layer, s, kvo), hs) * inv_sqrt;
        // a = softmax(a)
        softmax(scores_.data(), last + 1);
        // out_h = Σ_s a_s · v_s
        float* oh = &out[t * qd + h * hs];
        std::fill_n(oh, hs, 0.0f);
        for (int s = 0; s <= last; ++s) axpy(oh, scores_(s), &value_(layer, s, kvo), hs);
      }
    }
    if (layer == 0) held_ = pos + n;
  }

  glassbox::KvUsage usage() const override {
    return {held_, capacity_, static_cast<std::int64_t>((key_.size() + value_.size()) * sizeof(float))};
  }
  void clear() override { held_ = 0; }

 private:
  glassbox::AttentionShape sh_;
  int capacity_ = 0;
  int held_ = 0;
  xt::xtensor<float, 3> key_;    // (n_layers, capacity, kv_dim)
  xt::xtensor<float, 3> value_;  // (n_layers, capacity, kv_dim)
  xt::xtensor<float, 1> scores_; // (capacity) one head's attention weights
};

void register_factories(glassbox::Registrar& r) {
  r.add_attention({"kv-cache",
                   "contiguous K/V cache: one slot per position for every layer, allocated up front",
                   {{"capacity", glassbox::ParamType::Int, "0", "positions to hold (0: the model's context length)", 0.0, {}}},
                   "capacity"},
                  [](const glassbox::AttentionShape& s, const glassbox::Params& p) {
                    return std::make_unique<KvCache>(s, p);
                  });
}

}  // namespace

GLASSBOX_MODULE("kv-cache", "contiguous key/value cache attention", register_factories)
