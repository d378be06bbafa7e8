// MinHash signatures and LSH band keys; see minhash.h for the contract.
//
// Shape of the work: one pass over the bytes turns words into XXH3 hashes and
// word n-grams into shingle hashes, which are buffered in chunks of kChunk on
// the stack; each full chunk goes through the min kernel, which for a block of
// lanes keeps the running minima in registers and streams the chunk past them.
// The kernel is the hot spot (bands*rows mixes per shingle); it is written as a
// plain fixed-width loop so that the compiler vectorizes it, once for AVX-512
// (vpmullq does 8 64-bit multiplies) and once generic, chosen at run time.
#include "data/minhash.h"

// Inlined: a call into the shared library costs as much as hashing a short word.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <algorithm>
#include <array>

#include "core/check.h"

namespace crucible::data {
namespace {

constexpr uint64_t kMixMul = 0xbf58476d1ce4e5b9ull;  // splitmix64 / fmix constants
constexpr uint64_t kMixMul2 = 0x94d049bb133111ebull;
constexpr uint64_t kFoldMul = 0x9e3779b97f4a7c15ull;  // odd; shingle fold multiplier

// splitmix64 finaliser: a bijection with full avalanche.
inline uint64_t fmix64(uint64_t x) {
  x ^= x >> 30;
  x *= kMixMul;
  x ^= x >> 27;
  x *= kMixMul2;
  x ^= x >> 31;
  return x;
}

inline uint64_t splitmix64_next(uint64_t& state) {
  state += 0x9e3779b97f4a7c15ull;
  return fmix64(state);
}

// h_i(x) = mix(x ^ seed_i): two multiply-xorshift rounds (a full-avalanche
// mixer), so that the lanes order the shingles close to independently. A single
// round x*M ^ (x*M >> 32) measured 1.5x faster overall and passed the same
// quality tests, but shares one multiplier across lanes; we keep the margin.
inline uint64_t lane_mix(uint64_t x) {
  x ^= x >> 32;
  x *= kMixMul;
  x ^= x >> 29;
  x *= kMixMul2;
  x ^= x >> 32;
  return x;
}

// Byte classes for the word splitter: 0 separates words, 1 is a word byte kept
// as is (ASCII lowercase letter, digit, any non-ASCII byte), 2 an ASCII
// uppercase letter that is lowered before hashing.
constexpr std::array<uint8_t, 256> make_byte_class() {
  std::array<uint8_t, 256> c{};
  for (int b = 0; b < 256; ++b) {
    if ((b >= 'a' && b <= 'z') || (b >= '0' && b <= '9') || b >= 0x80) c[b] = 1;
    if (b >= 'A' && b <= 'Z') c[b] = 2;
  }
  return c;
}
constexpr std::array<uint8_t, 256> kByteClass = make_byte_class();

// XXH3 of the ASCII-lowercased word. Words without uppercase letters (most of
// them) are hashed in place; the others are lowered through a small buffer,
// streaming when a word is longer than the buffer (text in scripts without
// spaces can make a whole paragraph one word).
uint64_t hash_word(const uint8_t* w, size_t len, bool has_upper) {
  if (!has_upper) return XXH3_64bits(w, len);
  constexpr size_t kBuf = 256;
  uint8_t buf[kBuf];
  auto lower = [&](const uint8_t* src, size_t n) {
    for (size_t i = 0; i < n; ++i) buf[i] = kByteClass[src[i]] == 2 ? src[i] + 32 : src[i];
  };
  if (len <= kBuf) {
    lower(w, len);
    return XXH3_64bits(buf, len);
  }
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  for (size_t off = 0; off < len; off += kBuf) {
    size_t n = std::min(kBuf, len - off);
    lower(w + off, n);
    XXH3_64bits_update(&state, buf, n);
  }
  return XXH3_64bits_digest(&state);
}

// ---- min kernel ----
// mins[l] = min(mins[l], min over s of lane_mix(xs[s] ^ seeds[l])), l < lanes.

constexpr int kBlock = 8;  // lanes per pass: one zmm of minima, kept in a register

template <int kLanes>
[[gnu::always_inline]] inline void min_block(const uint64_t* xs, size_t n,
                                             const uint64_t* seeds, uint64_t* mins) {
  uint64_t acc[kLanes], sd[kLanes];
  for (int l = 0; l < kLanes; ++l) acc[l] = mins[l], sd[l] = seeds[l];
  for (size_t s = 0; s < n; ++s) {
    const uint64_t x = xs[s];
#pragma omp simd
    for (int l = 0; l < kLanes; ++l) {
      uint64_t h = lane_mix(x ^ sd[l]);
      acc[l] = h < acc[l] ? h : acc[l];
    }
  }
  for (int l = 0; l < kLanes; ++l) mins[l] = acc[l];
}

[[gnu::always_inline]] inline void min_all_lanes(const uint64_t* xs, size_t n,
                                                 const uint64_t* seeds, uint64_t* mins,
                                                 int lanes) {
  int l = 0;
  for (; l + kBlock <= lanes; l += kBlock) min_block<kBlock>(xs, n, seeds + l, mins + l);
  for (; l < lanes; ++l) min_block<1>(xs, n, seeds + l, mins + l);
}

__attribute__((target("avx512f,avx512dq"))) void min_kernel_avx512(
    const uint64_t* xs, size_t n, const uint64_t* seeds, uint64_t* mins, int lanes) {
  min_all_lanes(xs, n, seeds, mins, lanes);
}

void min_kernel_generic(const uint64_t* xs, size_t n, const uint64_t* seeds, uint64_t* mins,
                        int lanes) {
  min_all_lanes(xs, n, seeds, mins, lanes);
}

using MinKernel = void (*)(const uint64_t*, size_t, const uint64_t*, uint64_t*, int);

MinKernel pick_min_kernel() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq"))
    return min_kernel_avx512;
  return min_kernel_generic;
}

const MinKernel kMinKernel = pick_min_kernel();

}  // namespace

MinHasher::MinHasher(const MinHashParams& p) : p_(p) {
  CRUCIBLE_CHECK(p_.ngram >= 1, "[minhash] ngram must be >= 1");
  CRUCIBLE_CHECK(p_.bands >= 1 && p_.rows >= 1, "[minhash] bands and rows must be >= 1");
  CRUCIBLE_CHECK(p_.hash_bits == 32 || p_.hash_bits == 64, "[minhash] hash_bits must be 32 or 64");
  seeds_.resize(num_hashes());
  uint64_t state = p_.seed;
  for (uint64_t& s : seeds_) s = splitmix64_next(state);
}

size_t MinHasher::signature(std::string_view text, uint64_t* sig) const {
  const int H = num_hashes();
  const int n = p_.ngram;
  std::fill(sig, sig + H, UINT64_MAX);

  // The last n word hashes, a ring indexed by words % n; stack storage for the
  // usual small n.
  constexpr int kInlineWords = 16;
  uint64_t inline_ring[kInlineWords];
  std::vector<uint64_t> heap_ring;
  uint64_t* ring = inline_ring;
  if (n > kInlineWords) {
    heap_ring.resize(n);
    ring = heap_ring.data();
  }
  uint64_t k_pow = 1;  // K^(n-1): the weight of the word leaving the window
  for (int j = 1; j < n; ++j) k_pow *= kFoldMul;

  constexpr size_t kChunk = 512;  // shingle hashes per kernel call (4 KiB: stays in L1)
  uint64_t chunk[kChunk];
  size_t in_chunk = 0;
  size_t shingles = 0;
  size_t words = 0;
  size_t slot = 0;    // words % n: where the next word hash goes
  // Shingle hash: fmix64 of the polynomial sum_j w_j * K^(m-1-j) mod 2^64 over the
  // m word hashes, oldest first. Order-sensitive (the words sit at different
  // powers of an odd K), and the sum is updated in O(1) as the window slides,
  // where a fold like s = (s*K) ^ w would cost n dependent multiplies per word.
  uint64_t poly = 0;

  const auto* p = reinterpret_cast<const uint8_t*>(text.data());
  const size_t len = text.size();
  size_t i = 0;
  while (true) {
    while (i < len && kByteClass[p[i]] == 0) ++i;
    if (i == len) break;
    const size_t start = i;
    uint8_t cls = 0;
    while (i < len && kByteClass[p[i]] != 0) cls |= kByteClass[p[i++]];
    const uint64_t wh = hash_word(p + start, i - start, cls & 2);

    if (words >= size_t(n)) poly -= ring[slot] * k_pow;  // drop the oldest word
    poly = poly * kFoldMul + wh;
    ring[slot] = wh;
    slot = slot + 1 == size_t(n) ? 0 : slot + 1;
    ++words;
    if (words < size_t(n)) continue;
    chunk[in_chunk++] = fmix64(poly);
    ++shingles;
    if (in_chunk == kChunk) {
      kMinKernel(chunk, in_chunk, seeds_.data(), sig, H);
      in_chunk = 0;
    }
  }
  if (words > 0 && words < size_t(n)) {  // short document: one shingle of all its words
    chunk[in_chunk++] = fmix64(poly);  // poly holds exactly those words
    shingles = 1;
  }
  if (in_chunk > 0) kMinKernel(chunk, in_chunk, seeds_.data(), sig, H);

  // Masking commutes with min (it keeps the order of the top bits), so it is
  // applied once here. Wordless documents keep the all-ones signature.
  if (p_.hash_bits == 32 && shingles > 0)
    for (int h = 0; h < H; ++h) sig[h] &= 0xffffffff00000000ull;
  return shingles;
}

void MinHasher::band_keys(const uint64_t* sig, uint64_t* keys) const {
  const size_t row_bytes = size_t(p_.rows) * sizeof(uint64_t);
  for (int b = 0; b < p_.bands; ++b)
    keys[b] = XXH3_64bits_withSeed(sig + size_t(b) * p_.rows, row_bytes, uint64_t(b));
}

double estimate_jaccard(const uint32_t* a, const uint32_t* b, int n) {
  if (n <= 0) return 0.0;
  int same = 0;
  for (int i = 0; i < n; ++i) same += a[i] == b[i];
  return double(same) / n;
}

}  // namespace crucible::data
