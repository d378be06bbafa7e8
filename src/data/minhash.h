// MinHash signatures and LSH band keys for near-duplicate detection
// (Broder 1997; banding as in Leskovec, Rajaraman & Ullman, "Mining of Massive
// Datasets", ch. 3).
//
// Shingles: the document is lowercased (ASCII letters; other bytes kept) and cut
// into words = maximal runs of bytes that are ASCII letters or digits, or
// non-ASCII bytes; everything else separates words. Each word is hashed
// (XXH3-64); a shingle is `ngram` consecutive words, its 64-bit hash a mix of
// the word hashes. A document with fewer than `ngram` words has one shingle made
// of all its words; a document with no word has an empty shingle set and its
// signature is all-ones (UINT64_MAX), which matches only other wordless
// documents.
//
// Signature: bands * rows hash functions h_i(x) = mix(x ^ seed_i) (a 64-bit
// multiply-xorshift with seeds from the params' seed); sig[i] = min over shingles
// of h_i. With hash_bits = 32 each value is reduced to its top 32 bits first
// (low 32 bits zeroed: the 32-bit variant some pipelines use; 64 is the default).
//
// Band keys: key[b] = a 64-bit hash of rows sig[b*rows .. b*rows+rows-1] and b,
// so equal keys in different bands do not collide. Two documents are LSH
// candidates when any band key matches: P = 1 - (1 - J^rows)^bands.
//
// Verification: candidates are confirmed by the Jaccard estimate of their
// signatures (matching values / bands*rows) >= threshold. Signatures are stored
// as 32-bit fingerprints (the top 32 bits of each value): an accidental match of
// two different values has probability 2^-32, negligible against 1/112.
//
// MinHasher is immutable after construction; signature() is thread-safe.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

namespace crucible::data {

struct MinHashParams {
  int ngram = 5;        // words per shingle
  int bands = 14;
  int rows = 8;         // hashes per band; bands * rows hashes in all (112)
  int hash_bits = 64;   // 64 or 32
  double threshold = 0.7;  // estimated Jaccard that confirms a candidate pair
  uint64_t seed = 0x5eed;
};

class MinHasher {
 public:
  explicit MinHasher(const MinHashParams& p);
  const MinHashParams& params() const { return p_; }
  int num_hashes() const { return p_.bands * p_.rows; }

  // sig: num_hashes() values. Returns the number of shingles.
  size_t signature(std::string_view text, uint64_t* sig) const;
  // keys: params().bands values.
  void band_keys(const uint64_t* sig, uint64_t* keys) const;

 private:
  MinHashParams p_;
  std::vector<uint64_t> seeds_;  // num_hashes()
};

// The stored form of a signature value: its top 32 bits.
inline uint32_t sig_fingerprint(uint64_t v) { return uint32_t(v >> 32); }

// Fraction of positions where the fingerprints agree.
double estimate_jaccard(const uint32_t* a, const uint32_t* b, int n);

}  // namespace crucible::data
