// The llama weights as typed, read-only views over the mapped model file (nothing is copied or
// converted: a Q4_0 matrix stays Q4_0 in memory). Shapes are {rows, cols} = {outputs, inputs}.
#pragma once
#include <string>
#include <vector>

#include "glassbox/model/dtype.hpp"

namespace glassbox {

struct LayerWeights {
  Tensor rms_att;  // (dim)                       F32
  Tensor wq;       // (n_heads * head_size, dim)
  Tensor wk;       // (kv_dim, dim)
  Tensor wv;       // (kv_dim, dim)
  Tensor wo;       // (dim, n_heads * head_size)
  Tensor rms_ffn;  // (dim)                       F32
  Tensor w1;       // (hidden_dim, dim)            gate
  Tensor w2;       // (dim, hidden_dim)            down
  Tensor w3;       // (hidden_dim, dim)            up
};

struct Weights {
  Tensor token_embedding;            // (vocab_size, dim)   one row dequantized per lookup
  std::vector<LayerWeights> layers;  // (n_layers)
  Tensor rms_final;                  // (dim)               F32
  Tensor wcls;                       // (vocab_size, dim)   the embedding itself when shared
  Tensor rope_freqs;                 // (head_size / 2)     F32 frequency divisors; data == nullptr when absent

  // "Q8_0:32, F16:5, F32:11": how many tensors of each type, for the trace header and `inspect`.
  std::string type_summary() const;
  // Parameters stored (a shared classifier counted once).
  std::int64_t parameter_count() const;
};

}  // namespace glassbox
