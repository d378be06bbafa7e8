#include "core/rng.h"

#include <cmath>

namespace crucible {
uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

namespace {
inline void mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  uint64_t p = uint64_t(a) * b;
  hi = uint32_t(p >> 32);
  lo = uint32_t(p);
}
}  // namespace

void philox4x32(const uint32_t ctr_in[4], const uint32_t key_in[2], uint32_t out[4]) {
  uint32_t c0 = ctr_in[0], c1 = ctr_in[1], c2 = ctr_in[2], c3 = ctr_in[3];
  uint32_t k0 = key_in[0], k1 = key_in[1];
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    mulhilo(0xD2511F53u, c0, hi0, lo0);
    mulhilo(0xCD9E8D57u, c2, hi1, lo1);
    uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
    c0 = n0; c1 = n1; c2 = n2; c3 = n3;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

namespace {
void philox_block(const uint32_t key[2], uint64_t stream, uint64_t block, uint32_t out[4]) {
  uint32_t ctr[4] = {uint32_t(block), uint32_t(block >> 32), uint32_t(stream),
                     uint32_t(stream >> 32)};
  philox4x32(ctr, key, out);
}
}  // namespace

Rng::Rng(uint64_t seed, uint64_t stream, uint64_t counter) : stream_(stream) {
  uint64_t k = splitmix64(seed ^ splitmix64(stream + 0x5851F42D4C957F2Dull));
  key_[0] = uint32_t(k);
  key_[1] = uint32_t(k >> 32);
  seek(counter);
}

// block_ is the index of the block held in buf_ (lane_ == 4: used up), so
// position() == block_ * 4 + lane_ holds after construction, seek() and every draw.
void Rng::seek(uint64_t position) {
  block_ = position / 4;
  philox_block(key_, stream_, block_, buf_);
  lane_ = unsigned(position % 4);
}

void Rng::refill() {
  ++block_;
  philox_block(key_, stream_, block_, buf_);
  lane_ = 0;
}

uint32_t Rng::next_u32() {
  if (lane_ == 4) refill();
  return buf_[lane_++];
}

float Rng::uniform() { return float(next_u32() >> 8) * (1.0f / 16777216.0f); }

float Rng::normal() {
  // Box-Muller on two uniforms in (0,1]; one normal per pair keeps position() simple.
  float u1 = (float(next_u32() >> 8) + 1.0f) * (1.0f / 16777216.0f);
  float u2 = uniform();
  return std::sqrt(-2.0f * std::log(u1)) * std::cos(6.283185307179586f * u2);
}

void Rng::fill_normal(float* x, size_t n, float mean, float std) {
  for (size_t i = 0; i < n; ++i) x[i] = mean + std * normal();
}

void Rng::fill_uniform(float* x, size_t n, float lo, float hi) {
  for (size_t i = 0; i < n; ++i) x[i] = lo + (hi - lo) * uniform();
}

}  // namespace crucible
