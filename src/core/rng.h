// Counter-based random numbers (Philox4x32-10, Salmon et al. 2011).
// A stream is keyed by (seed, stream id); the n-th draw is a pure function of
// (seed, stream, n), so any rank or thread can jump to any position and a run
// that resumes at counter n reproduces exactly what it would have drawn.
// Rng is a cheap value type; not thread-safe (give each thread its own).
#pragma once
#include <cstddef>
#include <cstdint>

namespace crucible {

// SplitMix64's finaliser: a 64-bit key from any 64-bit value (seeds and
// stream ids are mixed through it before they key Philox).
uint64_t splitmix64(uint64_t x);

// Philox4x32-10 on a 128-bit counter and 64-bit key.
void philox4x32(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

class Rng {
 public:
  Rng(uint64_t seed, uint64_t stream, uint64_t counter = 0);

  uint32_t next_u32();
  float uniform();   // [0, 1)
  float normal();    // N(0, 1), Box-Muller
  void fill_normal(float* x, size_t n, float mean, float std);
  void fill_uniform(float* x, size_t n, float lo, float hi);

  // Position in the stream, in units of 32-bit draws; restore with seek().
  uint64_t position() const { return block_ * 4 + lane_; }
  void seek(uint64_t position);

 private:
  void refill();
  uint32_t key_[2];
  uint64_t stream_;
  uint64_t block_ = 0;  // index of the 128-bit block held in buf_
  uint32_t buf_[4];
  unsigned lane_ = 4;   // 4 = buffer empty
};

}  // namespace crucible
