// Attention "paged:B": K/V in blocks of B positions taken from a pool on demand, found through the
// sequence's block table, and returned to the pool when the sequence ends (vLLM's PagedAttention).
// Given a shared pool (PluginContext::kv_pool: serve --kv-pool), its blocks' memory comes from there, so a
// server's requests share one pool and memory follows what each one really holds. The sequence's own
// bookkeeping (its block table, the blocks it counts as free) is the same either way, so its trace is too.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <glassbox/error.hpp>
#include <glassbox/plugin.hpp>

namespace {

using glassbox::KvSpan;

class Paged final : public glassbox::KvStore {
 public:
  Paged(const glassbox::AttentionShape& shape, int block, int pool, std::shared_ptr<glassbox::KvBlockPool> shared)
      : sh_(shape), b_(block), pool_blocks_(pool), end_(shape.n_layers, 0), shared_(std::move(shared)) {
    // One block: B positions of keys and values for every layer, (n_layers, 2, B, kv_dim).
    block_floats_ = static_cast<std::size_t>(shape.n_layers) * 2 * b_ * shape.kv_dim();
    if (shared_) {
      // The blocks' memory is the shared pool's; `pool_blocks_` still bounds this sequence, as its own pool would.
      shared_->join(block_floats_, b_, "attention 'paged:" + std::to_string(b_) + "'");
      physical_.assign(static_cast<std::size_t>(pool_blocks_), -1);
    } else {
      pool_.assign(block_floats_ * pool_blocks_, 0.0f);
    }
    for (int i = pool_blocks_ - 1; i >= 0; --i) free_.push_back(i);  // block 0 is handed out first
  }
  ~Paged() override {
    // A shared pool gets every block back, however the sequence ended (done, cancelled, failed).
    try {
      clear();
    } catch (...) {
    }
  }
  Paged(const Paged&) = delete;
  Paged& operator=(const Paged&) = delete;

  int capacity() const override { return pool_blocks_ * b_; }

  void write(int layer, int pos, int n, const float* k, const float* v) override {
    if (pos != end_[layer])
      throw glassbox::InputError("attention 'paged': write at position " + std::to_string(pos) + " of layer " +
                                 std::to_string(layer) + " (expected " + std::to_string(end_[layer]) + ")");
    // Blocks are taken on demand, when a position first needs one.
    while (static_cast<int>(table_.size()) * b_ < pos + n) {
      if (free_.empty())
        throw glassbox::InputError("attention 'paged': position " + std::to_string(pos + n - 1) + " needs a block but all " +
                                   std::to_string(pool_blocks_) + " blocks of the pool are in use");
      if (shared_) {
        const int phys = shared_->take();
        if (phys < 0)
          throw glassbox::InputError("attention 'paged': position " + std::to_string(pos + n - 1) + " needs a block but all " +
                                     std::to_string(shared_->total()) + " blocks of the shared KV pool are in use");
        physical_[static_cast<std::size_t>(free_.back())] = phys;
      }
      table_.push_back(free_.back());
      free_.pop_back();
    }
    const std::size_t kvd = sh_.kv_dim();
    for (int t = 0; t < n; ++t) {
      std::memcpy(key(layer, pos + t), k + t * kvd, kvd * sizeof(float));
      std::memcpy(value(layer, pos + t), v + t * kvd, kvd * sizeof(float));
    }
    end_[layer] = pos + n;
  }

  void view(int layer, std::vector<KvSpan>& out) override {
    for (int p = 0; p < end_[layer]; p += b_) out.push_back({key(layer, p), value(layer, p), p, std::min(b_, end_[layer] - p)});
  }

  void remove(int p0, int p1) override {
    const std::size_t kvd = sh_.kv_dim();
    for (int l = 0; l < sh_.n_layers; ++l) {
      const int a = std::min(p0, end_[l]), b = std::min(p1, end_[l]);
      for (int p = b; p < end_[l]; ++p) {
        std::memcpy(key(l, p - (b - a)), key(l, p), kvd * sizeof(float));
        std::memcpy(value(l, p - (b - a)), value(l, p), kvd * sizeof(float));
      }
      end_[l] -= b - a;
      if (l == sh_.n_layers - 1) evicted_ += b - a;
    }
    // Blocks no position uses any more go back to the pool.
    const int needed = (*std::max_element(end_.begin(), end_.end()) + b_ - 1) / b_;
    while (static_cast<int>(table_.size()) > needed) release_last();
  }

  void clear() override {
    // The sequence ends: every block returns to the pool.
    while (!table_.empty()) release_last();
    std::fill(end_.begin(), end_.end(), 0);
    evicted_ = 0;
  }

  void describe(glassbox::KvState& s) const override {
    s.first_pos = 0;
    s.tokens = end_.back();
    s.capacity = capacity();
    s.block_size = b_;
    s.blocks_used = static_cast<int>(table_.size());
    s.blocks_free = static_cast<int>(free_.size());
    s.bytes = static_cast<std::int64_t>(s.blocks_used * block_floats_ * sizeof(float));
    s.last_block_unused = s.blocks_used * b_ - static_cast<int>(s.tokens);
    s.block_table.assign(table_.begin(), table_.end());
    s.evicted = evicted_;
  }

  std::int64_t bytes_per_block() const { return static_cast<std::int64_t>(block_floats_ * sizeof(float)); }

 private:
  // The table's last block goes back to the sequence's free list (and its memory to the shared pool).
  void release_last() {
    const int blk = table_.back();
    if (shared_) {
      shared_->give(physical_[static_cast<std::size_t>(blk)]);
      physical_[static_cast<std::size_t>(blk)] = -1;
    }
    free_.push_back(blk);
    table_.pop_back();
  }
  float* at(int layer, int pos, int which) {
    const int blk = table_[pos / b_];
    float* base = shared_ ? shared_->data(physical_[static_cast<std::size_t>(blk)]) : pool_.data() + blk * block_floats_;
    return base +
           ((static_cast<std::size_t>(layer) * 2 + which) * b_ + pos % b_) * sh_.kv_dim();
  }
  float* key(int layer, int pos) { return at(layer, pos, 0); }
  float* value(int layer, int pos) { return at(layer, pos, 1); }

  glassbox::AttentionShape sh_;
  int b_, pool_blocks_;
  std::size_t block_floats_ = 0;
  std::vector<int> end_;    // per layer: positions 0 .. end-1 are held
  std::vector<int> table_;  // the sequence's block table: logical block i -> physical block
  std::vector<int> free_;   // the pool's free blocks (a stack)
  std::int64_t evicted_ = 0;
  std::vector<float> pool_; // (pool_blocks, n_layers, 2, B, kv_dim); empty with a shared pool
  std::shared_ptr<glassbox::KvBlockPool> shared_;  // null: the blocks are pool_'s
  std::vector<int> physical_;  // with a shared pool: the sequence's block i -> the shared pool's block (-1: none)
};

void register_factories(glassbox::Registrar& r) {
  r.add_attention({"paged",
                   "K/V in blocks of B positions from a pool, allocated on demand through a block table",
                   {{"block", glassbox::ParamType::Int, "16", "positions per block (B)", 1.0, 4096.0},
                    {"pool", glassbox::ParamType::Int, "0", "blocks in the pool (0: enough for the model's context)", 0.0, {}}},
                   "block"},
                  [](const glassbox::Params& p, const glassbox::PluginContext& c) {
                    const auto& s = c.shape("attention 'paged'");
                    const int b = static_cast<int>(p.get_int("block"));
                    const auto pool = p.get_int("pool");
                    const auto need = (s.seq_len + b - 1) / b;
                    if (pool > need * 64)
                      throw glassbox::ConfigError("attention 'paged': pool = " + std::to_string(pool) + " blocks (expected at most " +
                                                  std::to_string(need * 64) + ", 64 contexts' worth)");
                    return std::make_unique<Paged>(s, b, pool == 0 ? static_cast<int>(need) : static_cast<int>(pool), c.kv_pool);
                  });
}

}  // namespace

GLASSBOX_MODULE("paged", "paged K/V cache: blocks from a pool through a block table", register_factories)
