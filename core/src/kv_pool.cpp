// SharedKvPool: one pool of K/V blocks for many sequences' stores (serve --kv-pool), with admission's reservations.
#include "glassbox/kv_pool.hpp"

#include <algorithm>

#include "glassbox/error.hpp"

namespace glassbox {

SharedKvPool::SharedKvPool(std::size_t bytes, int sequences, int positions)
    : bytes_(bytes), sequences_(std::max(sequences, 1)), positions_(std::max(positions, 1)) {}

int SharedKvPool::join(std::size_t block_floats, int block_positions, const std::string& who) {
  std::lock_guard lock(m_);
  if (block_floats_ == 0) {
    if (block_floats == 0 || block_positions <= 0)
      throw ConfigError(who + ": a block of " + std::to_string(block_floats) + " floats and " + std::to_string(block_positions) +
                        " positions cannot join the shared KV pool (expected more than 0 of each)");
    const std::size_t block_bytes = block_floats * sizeof(float);
    const std::int64_t n = bytes_ > 0 ? static_cast<std::int64_t>(bytes_ / block_bytes)
                                      : static_cast<std::int64_t>(sequences_) * ((positions_ + block_positions - 1) / block_positions);
    if (n < 1)
      throw ConfigError(who + ": the shared KV pool of " + std::to_string(bytes_) + " bytes holds no block of " + std::to_string(block_bytes) +
                        " bytes (" + std::to_string(block_positions) + " positions): give it more memory");
    if (n > (std::int64_t{1} << 30)) throw ConfigError(who + ": the shared KV pool would hold " + std::to_string(n) + " blocks (expected at most 2^30)");
    block_floats_ = block_floats;
    block_positions_ = block_positions;
    total_ = static_cast<int>(n);
    store_.reset(new float[block_floats_ * static_cast<std::size_t>(total_)]);
    free_.reserve(static_cast<std::size_t>(total_));
    for (int i = total_ - 1; i >= 0; --i) free_.push_back(i);
  } else if (block_floats != block_floats_ || block_positions != block_positions_) {
    throw ConfigError(who + ": blocks of " + std::to_string(block_positions) + " positions (" + std::to_string(block_floats) +
                      " floats) cannot join the shared KV pool, whose blocks hold " + std::to_string(block_positions_) + " positions (" +
                      std::to_string(block_floats_) + " floats)");
  }
  return total_;
}

int SharedKvPool::take() {
  std::lock_guard lock(m_);
  if (free_.empty()) return -1;
  const int b = free_.back();
  free_.pop_back();
  return b;
}

void SharedKvPool::give(int block) {
  std::lock_guard lock(m_);
  if (block < 0 || block >= total_ || static_cast<int>(free_.size()) >= total_)
    throw InputError("shared KV pool: block " + std::to_string(block) + " given back but not taken (" + std::to_string(total_) + " blocks)");
  free_.push_back(block);
}

int SharedKvPool::total() const {
  std::lock_guard lock(m_);
  return total_;
}
int SharedKvPool::used() const {
  std::lock_guard lock(m_);
  return total_ - static_cast<int>(free_.size());
}
int SharedKvPool::block_positions() const {
  std::lock_guard lock(m_);
  return block_positions_;
}
std::size_t SharedKvPool::block_bytes() const {
  std::lock_guard lock(m_);
  return block_floats_ * sizeof(float);
}
int SharedKvPool::blocks_for(std::int64_t positions) const {
  std::lock_guard lock(m_);
  if (block_positions_ == 0 || positions <= 0) return 0;
  return static_cast<int>((positions + block_positions_ - 1) / block_positions_);
}
bool SharedKvPool::reserve(int blocks) {
  std::lock_guard lock(m_);
  if (reserved_ + blocks > total_) return false;
  reserved_ += blocks;
  return true;
}
void SharedKvPool::unreserve(int blocks) {
  std::lock_guard lock(m_);
  reserved_ = std::max(0, reserved_ - blocks);
}
int SharedKvPool::reserved() const {
  std::lock_guard lock(m_);
  return reserved_;
}

}  // namespace glassbox
