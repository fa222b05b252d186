// The documented random generator behind every draw: PCG32 (XSH-RR, 64-bit state), seeded via splitmix64.
#pragma once
#include <cstdint>

namespace glassbox {

// PCG32 by M.E. O'Neill (pcg-random.org), "pcg32" = XSH RR 64/32. The seed is expanded
// with splitmix64 into state and stream so nearby seeds give unrelated sequences.
// Everything here is exact integer arithmetic: identical sequences on every machine.
class Rng {
 public:
  static constexpr const char* kName = "pcg32-xsh-rr/splitmix64";
  explicit Rng(std::uint64_t seed = 0) { reseed(seed); }

  // seed -> (initstate, initseq) = the first two outputs of splitmix64 started at `seed`,
  // then PCG32's own seeding (seed_pcg).
  void reseed(std::uint64_t seed) {
    std::uint64_t s = seed;
    const std::uint64_t init_state = splitmix64(s);
    const std::uint64_t init_seq = splitmix64(s);
    seed_pcg(init_state, init_seq);
  }

  // PCG32's reference seeding, pcg32_srandom_r(initstate, initseq) from pcg-c-basic:
  // the stream (increment) is 2*initseq+1. Exposed so the generator can be checked
  // against the published reference outputs (pcg32-demo: initstate 42, initseq 54).
  void seed_pcg(std::uint64_t init_state, std::uint64_t init_seq) {
    inc_ = (init_seq << 1u) | 1u;
    state_ = 0;
    next_u32();
    state_ += init_state;
    next_u32();
  }

  std::uint32_t next_u32() {
    const std::uint64_t old = state_;
    state_ = old * 6364136223846793005ULL + inc_;
    const auto xorshifted = static_cast<std::uint32_t>(((old >> 18u) ^ old) >> 27u);
    const auto rot = static_cast<std::uint32_t>(old >> 59u);
    return (xorshifted >> rot) | (xorshifted << ((-rot) & 31u));
  }

  // Uniform in [0, 1) with 24 bits of precision: the top 24 bits of one draw times 2^-24,
  // exactly representable as a float, so the value is the same on every platform.
  float uniform() { return static_cast<float>(next_u32() >> 8) * (1.0f / 16777216.0f); }

  // One step of splitmix64 (Steele, Lea, Flood 2014; Vigna's splitmix64.c): advances x, returns the output.
  static std::uint64_t splitmix64(std::uint64_t& x) {
    std::uint64_t z = (x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }

 private:
  std::uint64_t state_ = 0, inc_ = 1;
};

}  // namespace glassbox
