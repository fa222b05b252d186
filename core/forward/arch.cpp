// The architecture tables: for each family its description and tensors, as llama.cpp's converter
// (convert_hf_to_gguf.py) names them. Sources for each fact: ../shared/gguf/arch/README.md and
// docs/architectures.md.
#include "glassbox/forward/arch.hpp"

#include <cmath>
#include <cstdio>

#include "glassbox/error.hpp"
#include "glassbox/model/config.hpp"
#include "glassbox/model/weights.hpp"

namespace glassbox {

namespace {

using W = Weights;
using L = LayerWeights;

// Slots every family shares, and the ones only some have.
TensorSlot g(const char* name, Dim rows, Dim cols, bool required, bool f32, Tensor W::*m) { return {name, rows, cols, required, f32, m, nullptr}; }
TensorSlot l(const char* name, Dim rows, Dim cols, bool required, bool f32, Tensor L::*m) { return {name, rows, cols, required, f32, nullptr, m}; }

constexpr bool kReq = true, kOpt = false, kF32 = true, kAny = false;

// Global tensors of a RoPE model: embedding, final norm, an untied output (absent: tied), rope factors.
std::vector<TensorSlot> rope_globals() {
  return {g("token_embd.weight", Dim::Vocab, Dim::Embd, kReq, kAny, &W::token_embedding),
          g("output_norm.weight", Dim::Embd, Dim::None, kReq, kF32, &W::rms_final),
          g("output.weight", Dim::Vocab, Dim::Embd, kOpt, kAny, &W::wcls),
          g("rope_freqs.weight", Dim::RotHalf, Dim::None, kOpt, kF32, &W::rope_freqs)};
}
// llama's block: separate Q, K, V; SwiGLU with separate gate and up.
std::vector<TensorSlot> llama_block() {
  return {l("attn_norm.weight", Dim::Embd, Dim::None, kReq, kF32, &L::rms_att),
          l("attn_q.weight", Dim::QDim, Dim::Embd, kReq, kAny, &L::wq),
          l("attn_k.weight", Dim::KvDim, Dim::Embd, kReq, kAny, &L::wk),
          l("attn_v.weight", Dim::KvDim, Dim::Embd, kReq, kAny, &L::wv),
          l("attn_output.weight", Dim::Embd, Dim::QDim, kReq, kAny, &L::wo),
          l("ffn_norm.weight", Dim::Embd, Dim::None, kReq, kF32, &L::rms_ffn),
          l("ffn_gate.weight", Dim::Hidden, Dim::Embd, kReq, kAny, &L::w1),
          l("ffn_down.weight", Dim::Embd, Dim::Hidden, kReq, kAny, &L::w2),
          l("ffn_up.weight", Dim::Hidden, Dim::Embd, kReq, kAny, &L::w3)};
}
std::vector<TensorSlot> operator+(std::vector<TensorSlot> a, const std::vector<TensorSlot>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<ArchTable> make_tables() {
  std::vector<ArchTable> t;
  // llama: RMSNorm, RoPE on adjacent pairs, SwiGLU. Also SmolLM2 (tied), TinyLlama, Llama 3.x (rope_freqs).
  t.push_back({"llama", "Llama 2/3, TinyLlama, SmolLM2, stories (llama2.c)", {}, rope_globals() + llama_block()});

  // gpt2: LayerNorm with biases, learned positions, fused QKV, a GELU MLP, a bias on every projection.
  ArchDescription gpt2;
  gpt2.norm = NormKind::LayerNorm;
  gpt2.norm_bias = true;
  gpt2.position = PositionKind::Learned;
  gpt2.ffn = FfnKind::GeluMlp;
  gpt2.qkv_bias = gpt2.out_bias = gpt2.ffn_bias = true;
  gpt2.fused_qkv = true;
  t.push_back({"gpt2", "GPT-2", gpt2,
               {g("token_embd.weight", Dim::Vocab, Dim::Embd, kReq, kAny, &W::token_embedding),
                g("position_embd.weight", Dim::TrainCtx, Dim::Embd, kReq, kAny, &W::position_embedding),
                g("output_norm.weight", Dim::Embd, Dim::None, kReq, kF32, &W::rms_final),
                g("output_norm.bias", Dim::Embd, Dim::None, kReq, kF32, &W::final_norm_bias),
                g("output.weight", Dim::Vocab, Dim::Embd, kOpt, kAny, &W::wcls),
                l("attn_norm.weight", Dim::Embd, Dim::None, kReq, kF32, &L::rms_att),
                l("attn_norm.bias", Dim::Embd, Dim::None, kReq, kF32, &L::att_norm_bias),
                l("attn_qkv.weight", Dim::QkvDim, Dim::Embd, kReq, kAny, &L::wqkv),
                l("attn_qkv.bias", Dim::QkvDim, Dim::None, kReq, kF32, &L::bqkv),
                l("attn_output.weight", Dim::Embd, Dim::QDim, kReq, kAny, &L::wo),
                l("attn_output.bias", Dim::Embd, Dim::None, kReq, kF32, &L::bo),
                l("ffn_norm.weight", Dim::Embd, Dim::None, kReq, kF32, &L::rms_ffn),
                l("ffn_norm.bias", Dim::Embd, Dim::None, kReq, kF32, &L::ffn_norm_bias),
                l("ffn_up.weight", Dim::Hidden, Dim::Embd, kReq, kAny, &L::w3),
                l("ffn_up.bias", Dim::Hidden, Dim::None, kReq, kF32, &L::b3),
                l("ffn_down.weight", Dim::Embd, Dim::Hidden, kReq, kAny, &L::w2),
                l("ffn_down.bias", Dim::Embd, Dim::None, kReq, kF32, &L::b2)}});

  // qwen2: llama with biases on Q, K, V and NeoX RoPE.
  ArchDescription qwen2;
  qwen2.position = PositionKind::RopeNeox;
  qwen2.qkv_bias = true;
  t.push_back({"qwen2", "Qwen2, Qwen2.5", qwen2,
               rope_globals() + llama_block() +
                   std::vector<TensorSlot>{l("attn_q.bias", Dim::QDim, Dim::None, kReq, kF32, &L::bq),
                                           l("attn_k.bias", Dim::KvDim, Dim::None, kReq, kF32, &L::bk),
                                           l("attn_v.bias", Dim::KvDim, Dim::None, kReq, kF32, &L::bv)}});

  // qwen3: qwen2 without biases, with an RMSNorm over each head of Q and K before RoPE.
  ArchDescription qwen3;
  qwen3.position = PositionKind::RopeNeox;
  qwen3.qk_norm = true;
  t.push_back({"qwen3", "Qwen3", qwen3,
               rope_globals() + llama_block() +
                   std::vector<TensorSlot>{l("attn_q_norm.weight", Dim::HeadDim, Dim::None, kReq, kF32, &L::q_norm),
                                           l("attn_k_norm.weight", Dim::HeadDim, Dim::None, kReq, kF32, &L::k_norm)}});

  // gemma2 / gemma3: √dim embedding scale, GeGLU, post-norms on both branches, NeoX RoPE, windows.
  auto gemma_block = [](bool qk_norm) {
    std::vector<TensorSlot> b = {l("attn_norm.weight", Dim::Embd, Dim::None, kReq, kF32, &L::rms_att),
                                 l("attn_q.weight", Dim::QDim, Dim::Embd, kReq, kAny, &L::wq),
                                 l("attn_k.weight", Dim::KvDim, Dim::Embd, kReq, kAny, &L::wk),
                                 l("attn_v.weight", Dim::KvDim, Dim::Embd, kReq, kAny, &L::wv),
                                 l("attn_output.weight", Dim::Embd, Dim::QDim, kReq, kAny, &L::wo),
                                 l("post_attention_norm.weight", Dim::Embd, Dim::None, kReq, kF32, &L::post_att_norm),
                                 l("ffn_norm.weight", Dim::Embd, Dim::None, kReq, kF32, &L::rms_ffn),
                                 l("ffn_gate.weight", Dim::Hidden, Dim::Embd, kReq, kAny, &L::w1),
                                 l("ffn_down.weight", Dim::Embd, Dim::Hidden, kReq, kAny, &L::w2),
                                 l("ffn_up.weight", Dim::Hidden, Dim::Embd, kReq, kAny, &L::w3),
                                 l("post_ffw_norm.weight", Dim::Embd, Dim::None, kReq, kF32, &L::post_ffn_norm)};
    if (qk_norm) {
      b.push_back(l("attn_q_norm.weight", Dim::HeadDim, Dim::None, kReq, kF32, &L::q_norm));
      b.push_back(l("attn_k_norm.weight", Dim::HeadDim, Dim::None, kReq, kF32, &L::k_norm));
    }
    return b;
  };
  ArchDescription gemma2;
  gemma2.position = PositionKind::RopeNeox;
  gemma2.ffn = FfnKind::GeGLU;
  gemma2.post_norms = true;
  gemma2.embed_scale = true;
  gemma2.window = WindowPattern::EvenLayers;
  t.push_back({"gemma2", "Gemma 2", gemma2, rope_globals() + gemma_block(false)});
  ArchDescription gemma3 = gemma2;
  gemma3.qk_norm = true;
  gemma3.window = WindowPattern::FiveOfSix;
  t.push_back({"gemma3", "Gemma 3", gemma3, rope_globals() + gemma_block(true)});

  // phi3: fused QKV and fused gate|up, NeoX RoPE, a sliding window on every layer.
  ArchDescription phi3;
  phi3.position = PositionKind::RopeNeox;
  phi3.fused_qkv = true;
  phi3.fused_gate_up = true;
  phi3.window = WindowPattern::Every;
  t.push_back({"phi3", "Phi-3", phi3,
               rope_globals() + std::vector<TensorSlot>{
                                    l("attn_norm.weight", Dim::Embd, Dim::None, kReq, kF32, &L::rms_att),
                                    l("attn_qkv.weight", Dim::QkvDim, Dim::Embd, kReq, kAny, &L::wqkv),
                                    l("attn_output.weight", Dim::Embd, Dim::QDim, kReq, kAny, &L::wo),
                                    l("ffn_norm.weight", Dim::Embd, Dim::None, kReq, kF32, &L::rms_ffn),
                                    l("ffn_up.weight", Dim::GateUp, Dim::Embd, kReq, kAny, &L::w13),
                                    l("ffn_down.weight", Dim::Embd, Dim::Hidden, kReq, kAny, &L::w2)}});
  return t;
}

}  // namespace

const std::vector<ArchTable>& architectures() {
  static const std::vector<ArchTable> t = make_tables();
  return t;
}

const ArchTable* find_architecture(std::string_view name) {
  for (const auto& a : architectures())
    if (name == a.name) return &a;
  return nullptr;
}

std::string supported_architectures() {
  std::string s;
  for (const auto& a : architectures()) s += (s.empty() ? "" : ", ") + std::string(a.name);
  return s;
}

std::string_view to_string(NormKind k) { return k == NormKind::RMSNorm ? "rmsnorm" : "layernorm"; }
std::string_view to_string(PositionKind k) {
  switch (k) {
    case PositionKind::RopeAdjacent: return "rope-adjacent";
    case PositionKind::RopeNeox: return "rope-neox";
    case PositionKind::Learned: return "learned";
  }
  return "?";
}
std::string_view to_string(FfnKind k) {
  switch (k) {
    case FfnKind::SwiGLU: return "swiglu";
    case FfnKind::GeGLU: return "geglu";
    case FfnKind::GeluMlp: return "gelu-mlp";
  }
  return "?";
}
std::string_view to_string(WindowPattern k) {
  switch (k) {
    case WindowPattern::None: return "none";
    case WindowPattern::Every: return "every";
    case WindowPattern::EvenLayers: return "even-layers";
    case WindowPattern::FiveOfSix: return "5-of-6";
  }
  return "?";
}
std::string_view to_string(GeluKind k) {
  switch (k) {
    case GeluKind::Tanh: return "tanh";
    case GeluKind::Erf: return "erf";
    case GeluKind::Fp16Table: return "fp16-table";
  }
  return "?";
}

GeluKind parse_gelu(std::string_view text) {
  for (GeluKind k : {GeluKind::Tanh, GeluKind::Erf, GeluKind::Fp16Table})
    if (text == to_string(k)) return k;
  throw ConfigError("--gelu '" + std::string(text) + "' (expected tanh, erf or fp16-table)");
}

std::vector<std::pair<std::string, std::string>> describe(const ArchDescription& d, bool only_differences) {
  const ArchDescription llama;
  std::vector<std::pair<std::string, std::string>> out;
  auto add = [&](const char* key, std::string value, bool differs) {
    if (!only_differences || differs) out.emplace_back(key, std::move(value));
  };
  auto yes = [](bool b) { return std::string(b ? "yes" : "no"); };
  add("norm", std::string(to_string(d.norm)) + (d.norm_bias ? "+bias" : ""), d.norm != llama.norm || d.norm_bias);
  add("position", std::string(to_string(d.position)), d.position != llama.position);
  add("ffn", std::string(to_string(d.ffn)), d.ffn != llama.ffn);
  add("qkv_bias", yes(d.qkv_bias), d.qkv_bias);
  add("out_bias", yes(d.out_bias), d.out_bias);
  add("ffn_bias", yes(d.ffn_bias), d.ffn_bias);
  add("fused_qkv", yes(d.fused_qkv), d.fused_qkv);
  add("fused_gate_up", yes(d.fused_gate_up), d.fused_gate_up);
  add("qk_norm", yes(d.qk_norm), d.qk_norm);
  add("post_norms", yes(d.post_norms), d.post_norms);
  add("embed_scale", yes(d.embed_scale), d.embed_scale);
  add("window", std::string(to_string(d.window)), d.window != llama.window);
  return out;
}

std::vector<std::pair<std::string, std::string>> describe_config(const Config& c) {
  auto out = describe(c.arch);
  if (c.n_heads <= 0 || c.n_layers <= 0) return out;  // a config without shapes (hand-made headers)
  auto num = [](double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.9g", v);
    return std::string(b);
  };
  out.emplace_back("head_dim", std::to_string(c.head_size()));
  if (c.arch.position != PositionKind::Learned) out.emplace_back("n_rot", std::to_string(c.rot_dims()));
  out.emplace_back("attn_scale", num(c.attention_scale()));
  if (c.attn_softcap > 0) out.emplace_back("attn_softcap", num(c.attn_softcap));
  if (c.final_softcap > 0) out.emplace_back("final_softcap", num(c.final_softcap));
  if (c.arch.window != WindowPattern::None) {
    // Each layer's window (0: global) and, where they differ, each layer's RoPE base.
    std::string windows, bases;
    bool differ = false;
    for (int l = 0; l < c.n_layers; ++l) {
      const LayerRule r = c.layer_rule(l);
      windows += (l ? "," : "") + std::to_string(r.window);
      bases += (l ? "," : "") + num(r.rope_theta);
      differ = differ || r.rope_theta != c.rope_theta;
    }
    out.emplace_back("sliding_window", std::to_string(c.sliding_window));
    out.emplace_back("layer_windows", windows);
    if (differ) out.emplace_back("layer_rope_theta", bases);
  }
  if (c.arch.ffn != FfnKind::SwiGLU) out.emplace_back("gelu", std::string(to_string(c.gelu)));
  return out;
}

float Config::attention_scale() const { return attn_scale > 0 ? attn_scale : 1.0f / std::sqrt(static_cast<float>(head_size())); }

LayerRule Config::layer_rule(int layer) const {
  bool windowed = false;
  switch (arch.window) {
    case WindowPattern::None: break;
    case WindowPattern::Every: windowed = true; break;
    case WindowPattern::EvenLayers: windowed = layer % 2 == 0; break;          // Gemma 2: local, global, local, ...
    case WindowPattern::FiveOfSix: windowed = layer % 6 < 5; break;           // Gemma 3: five local, then one global
  }
  LayerRule r;
  r.window = windowed ? sliding_window : 0;
  r.rope_theta = windowed && local_rope_theta > 0 ? local_rope_theta : rope_theta;
  return r;
}

}  // namespace glassbox
