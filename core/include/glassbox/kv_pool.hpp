// SharedKvPool: the K/V block pool a server's requests share (serve --kv-pool), the owner's side of
// KvBlockPool: its memory, its free list and what admission has promised away.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "glassbox/forward/attention.hpp"

namespace glassbox {

// Blocks are allocated at the first join, when their size is known: `bytes` / the block's bytes of them,
// or, with bytes 0, `sequences` × ceil(`positions` / the block's positions) (as many as that many
// sequences of that many positions would hold in pools of their own). Blocks are handed out lowest index
// first. Besides take and give, an owner may reserve blocks for a sequence before it starts (admission:
// serve reserves what a request can ever hold), so that no admitted sequence finds the pool empty.
class SharedKvPool final : public KvBlockPool {
 public:
  SharedKvPool(std::size_t bytes, int sequences, int positions);

  int join(std::size_t block_floats, int block_positions, const std::string& who) override;
  int take() override;
  void give(int block) override;
  float* data(int block) override { return store_.get() + static_cast<std::size_t>(block) * block_floats_; }
  int total() const override;
  int used() const override;

  int block_positions() const;       // positions per block (0 before the first join)
  std::size_t block_bytes() const;   // bytes per block (0 before the first join)
  // Blocks needed to hold `positions` positions.
  int blocks_for(std::int64_t positions) const;
  // Admission: promises `blocks` more if the promised total stays within the pool (true), else nothing (false).
  bool reserve(int blocks);
  void unreserve(int blocks);
  int reserved() const;

 private:
  mutable std::mutex m_;
  std::size_t bytes_;
  int sequences_, positions_;
  std::size_t block_floats_ = 0;
  int block_positions_ = 0;
  int total_ = 0, reserved_ = 0;
  std::vector<int> free_;     // a stack: the lowest index on top
  // (total, block_floats), left uninitialised: a block's pages are committed when a store first writes them, so
  // a large pool costs memory only as far as it is used (every position is written before it is read).
  std::unique_ptr<float[]> store_;
};

}  // namespace glassbox
