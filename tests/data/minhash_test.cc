#include "data/minhash.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace crucible::data {
namespace {

// ---- naive references, written independently of minhash.cc ----

// Words per the header: runs of ASCII letters/digits or non-ASCII bytes, ASCII
// letters lowered.
std::vector<std::string> naive_words(const std::string& text) {
  std::vector<std::string> words;
  std::string cur;
  for (unsigned char c : text) {
    bool word_byte = std::isalnum(c) || c >= 0x80;  // "C" locale: ASCII only
    if (word_byte) {
      cur += (c >= 'A' && c <= 'Z') ? char(c + 32) : char(c);
    } else if (!cur.empty()) {
      words.push_back(cur);
      cur.clear();
    }
  }
  if (!cur.empty()) words.push_back(cur);
  return words;
}

std::set<std::string> naive_shingles(const std::string& text, int n) {
  std::vector<std::string> w = naive_words(text);
  std::set<std::string> out;
  if (w.empty()) return out;
  size_t len = std::min<size_t>(n, w.size());
  for (size_t i = 0; i + len <= w.size(); ++i) {
    std::string s;
    for (size_t j = 0; j < len; ++j) s += w[i + j] + ' ';
    out.insert(s);
  }
  return out;
}

double exact_jaccard(const std::set<std::string>& a, const std::set<std::string>& b) {
  if (a.empty() && b.empty()) return 1.0;
  size_t inter = 0;
  for (const auto& s : a) inter += b.count(s);
  return double(inter) / double(a.size() + b.size() - inter);
}

std::string join(const std::vector<std::string>& words) {
  std::string s;
  for (const auto& w : words) s += w + ' ';
  return s;
}

// Distinct random lowercase words, so that distinct word 5-grams are distinct shingles.
std::vector<std::string> make_vocab(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::set<std::string> seen;
  std::vector<std::string> vocab;
  while (vocab.size() < n) {
    std::string w(3 + rng() % 7, 'a');
    for (char& c : w) c = char('a' + rng() % 26);
    if (seen.insert(w).second) vocab.push_back(w);
  }
  return vocab;
}

struct Doc {
  std::vector<uint64_t> sig;
  std::vector<uint32_t> fp;
  std::vector<uint64_t> keys;
};

Doc sketch(const MinHasher& mh, const std::string& text) {
  Doc d;
  d.sig.resize(mh.num_hashes());
  mh.signature(text, d.sig.data());
  for (uint64_t v : d.sig) d.fp.push_back(sig_fingerprint(v));
  d.keys.resize(mh.params().bands);
  mh.band_keys(d.sig.data(), d.keys.data());
  return d;
}

double estimate(const Doc& a, const Doc& b) {
  return estimate_jaccard(a.fp.data(), b.fp.data(), int(a.fp.size()));
}

bool any_band_equal(const Doc& a, const Doc& b) {
  for (size_t i = 0; i < a.keys.size(); ++i)
    if (a.keys[i] == b.keys[i]) return true;
  return false;
}

// A near-duplicate of `base`: `edits` random replacements, insertions or deletions.
std::vector<std::string> mutate(std::vector<std::string> words, int edits,
                                const std::vector<std::string>& vocab, std::mt19937_64& rng) {
  for (int e = 0; e < edits; ++e) {
    size_t pos = rng() % words.size();
    switch (rng() % 3) {
      case 0: words[pos] = vocab[rng() % vocab.size()]; break;
      case 1: words.insert(words.begin() + pos, vocab[rng() % vocab.size()]); break;
      default: words.erase(words.begin() + pos); break;
    }
  }
  return words;
}

std::vector<std::string> random_doc(size_t n, const std::vector<std::string>& vocab,
                                    std::mt19937_64& rng) {
  std::vector<std::string> w(n);
  for (auto& s : w) s = vocab[rng() % vocab.size()];
  return w;
}

class MinHash : public ::testing::TestWithParam<int> {
 protected:
  MinHashParams params() const {
    MinHashParams p;
    p.hash_bits = GetParam();
    return p;
  }
};

INSTANTIATE_TEST_SUITE_P(Bits, MinHash, ::testing::Values(64, 32),
                         [](const auto& info) { return "bits" + std::to_string(info.param); });

TEST_P(MinHash, ShingleCountAndDeterminism) {
  MinHasher a(params()), b(params());
  std::vector<uint64_t> sa(a.num_hashes()), sb(b.num_hashes());
  EXPECT_EQ(a.num_hashes(), 112);
  EXPECT_EQ(a.signature("one two three four five six seven", sa.data()), 3u);
  EXPECT_EQ(b.signature("one two three four five six seven", sb.data()), 3u);
  EXPECT_EQ(sa, sb);  // a fresh hasher with the same params agrees
  EXPECT_EQ(a.signature("one two three four five", sa.data()), 1u);
  EXPECT_EQ(a.signature("one two", sa.data()), 1u);  // short doc: one shingle
  EXPECT_EQ(a.signature(" ,; ", sa.data()), 0u);

  MinHashParams other = params();
  other.seed += 1;
  MinHasher c(other);
  std::vector<uint64_t> sc(c.num_hashes());
  c.signature("one two three four five six seven", sc.data());
  a.signature("one two three four five six seven", sa.data());
  int same = 0;
  for (int i = 0; i < a.num_hashes(); ++i) same += sa[i] == sc[i];
  EXPECT_EQ(same, 0);  // another seed: other hash functions, other values
}

TEST_P(MinHash, CasePunctuationAndWhitespaceDoNotMatter) {
  MinHasher mh(params());
  Doc a = sketch(mh, "Hello, World! The quick-brown fox (jumps) over 2 lazy dogs.");
  Doc b = sketch(mh, "hello world the quick brown fox jumps over 2 lazy dogs");
  Doc c = sketch(mh, "\n\tHELLO   world;the QUICK\r\nbrown...fox jumps/over 2 lazy DOGS ");
  EXPECT_EQ(a.sig, b.sig);
  EXPECT_EQ(a.sig, c.sig);
  Doc d = sketch(mh, "hello world the quick brown fox jumps over 3 lazy dogs");  // digits count
  EXPECT_NE(a.sig, d.sig);
}

TEST_P(MinHash, NonAsciiBytesAreWordBytesAndNotLowered) {
  MinHasher mh(params());
  // "café au lait et du pain": é (C3 A9) is part of the word.
  Doc a = sketch(mh, "caf\xC3\xA9 au lait et du pain");
  Doc b = sketch(mh, "caf au lait et du pain");
  Doc c = sketch(mh, "caf \xC3\xA9 au lait et du");  // é split off: other words
  EXPECT_NE(a.sig, b.sig);
  EXPECT_NE(a.sig, c.sig);
  // Only ASCII letters are lowered: É (C3 89) stays distinct from é (C3 A9).
  Doc upper = sketch(mh, "CAF\xC3\x89 AU LAIT ET DU PAIN");
  Doc mixed = sketch(mh, "CAF\xC3\xA9 AU LAIT ET DU PAIN");
  EXPECT_NE(a.sig, upper.sig);
  EXPECT_EQ(a.sig, mixed.sig);
}

TEST_P(MinHash, LongWordsWithUppercaseAreLowered) {
  // Words longer than any internal buffer (lowered in pieces) must hash as their lowercase form.
  MinHasher mh(params());
  for (size_t len : {255, 256, 257, 1000, 5000}) {
    std::string lower(len, 'x'), upper(len, 'X');
    for (size_t i = 0; i < len; i += 7) lower[i] = 'q', upper[i] = 'Q';
    upper[len / 2] = 'x';  // mixed case
    Doc a = sketch(mh, "start " + lower + " middle " + lower + " end");
    Doc b = sketch(mh, "START " + upper + " Middle " + lower + " END");
    EXPECT_EQ(a.sig, b.sig) << len;
    lower[len - 1] = 'z';
    Doc c = sketch(mh, "start " + lower + " middle " + lower + " end");
    EXPECT_NE(a.sig, c.sig) << len;
  }
}

TEST_P(MinHash, WordOrderMatters) {
  MinHasher mh(params());
  EXPECT_NE(sketch(mh, "a b c d e").sig, sketch(mh, "a b c e d").sig);
  EXPECT_NE(sketch(mh, "a b c").sig, sketch(mh, "c b a").sig);  // short docs too
  EXPECT_NE(sketch(mh, "a b c").sig, sketch(mh, "a b").sig);
  EXPECT_NE(sketch(mh, "a").sig, sketch(mh, "a a").sig);
  // Same multiset of words, permuted: the shingle sets are (almost) disjoint.
  std::mt19937_64 rng(7);
  auto vocab = make_vocab(2000, 1);
  auto words = random_doc(200, vocab, rng);
  auto perm = words;
  std::shuffle(perm.begin(), perm.end(), rng);
  double j = exact_jaccard(naive_shingles(join(words), 5), naive_shingles(join(perm), 5));
  EXPECT_LT(j, 0.02);
  EXPECT_LT(estimate(sketch(mh, join(words)), sketch(mh, join(perm))), 0.1);
}

TEST_P(MinHash, WordlessDocumentIsAllOnes) {
  MinHasher mh(params());
  for (const char* text : {"", " ", " \t\n", "...,;!? -- ()"}) {
    Doc d = sketch(mh, text);
    for (uint64_t v : d.sig) ASSERT_EQ(v, UINT64_MAX) << '"' << text << '"';
  }
  Doc e1 = sketch(mh, ""), e2 = sketch(mh, "?!");
  EXPECT_DOUBLE_EQ(estimate(e1, e2), 1.0);
  EXPECT_EQ(e1.keys, e2.keys);
  // Any document with a word differs in (nearly) every position.
  Doc w = sketch(mh, "x");
  EXPECT_LT(estimate(e1, w), 0.05);
}

TEST_P(MinHash, HashBitsMasksLowHalf) {
  MinHasher mh(params());
  Doc d = sketch(mh, "the quick brown fox jumps over the lazy dog again and again");
  int nonzero_low = 0;
  for (uint64_t v : d.sig) nonzero_low += (v & 0xffffffffu) != 0;
  if (GetParam() == 32) {
    EXPECT_EQ(nonzero_low, 0);
    // The masked signature is the 64-bit one with its low halves cleared.
    MinHashParams p64 = params();
    p64.hash_bits = 64;
    Doc full = sketch(MinHasher(p64), "the quick brown fox jumps over the lazy dog again and again");
    for (int i = 0; i < mh.num_hashes(); ++i)
      EXPECT_EQ(d.sig[i], full.sig[i] & 0xffffffff00000000ull);
  } else {
    EXPECT_GT(nonzero_low, 100);
  }
}

// Reference composition: the shingle set of a document is the union of the sets
// of its 5-word windows (each a one-shingle document), so its signature is the
// elementwise min of theirs. Long documents cross the internal chunking.
TEST_P(MinHash, SignatureIsMinOverWindowSignatures) {
  MinHasher mh(params());
  std::mt19937_64 rng(11);
  auto vocab = make_vocab(300, 2);  // small vocabulary: repeated shingles too
  for (size_t n : {5, 6, 40, 511, 512, 513, 1100, 2000}) {
    auto words = random_doc(n, vocab, rng);
    std::vector<uint64_t> ref(mh.num_hashes(), UINT64_MAX), win(mh.num_hashes());
    for (size_t i = 0; i + 5 <= n; ++i) {
      std::vector<std::string> w(words.begin() + i, words.begin() + i + 5);
      ASSERT_EQ(mh.signature(join(w), win.data()), 1u);
      for (int h = 0; h < mh.num_hashes(); ++h) ref[h] = std::min(ref[h], win[h]);
    }
    std::vector<uint64_t> sig(mh.num_hashes());
    EXPECT_EQ(mh.signature(join(words), sig.data()), n - 4);
    EXPECT_EQ(sig, ref) << n << " words";
  }
}

TEST(MinHashLib, EstimateJaccardCountsEqualFingerprints) {
  std::vector<uint32_t> a(112), b(112);
  for (int i = 0; i < 112; ++i) a[i] = b[i] = uint32_t(i * 2654435761u);
  EXPECT_DOUBLE_EQ(estimate_jaccard(a.data(), b.data(), 112), 1.0);
  for (int i = 0; i < 28; ++i) b[i * 4] ^= 1u << (i % 32);
  EXPECT_DOUBLE_EQ(estimate_jaccard(a.data(), b.data(), 112), 84.0 / 112);
  EXPECT_DOUBLE_EQ(estimate_jaccard(a.data(), b.data(), 4), 3.0 / 4);
  EXPECT_EQ(sig_fingerprint(0x123456789abcdef0ull), 0x12345678u);
}

TEST(MinHashLib, BandKeysDependOnTheirRowsAndBandIndex) {
  MinHasher mh(MinHashParams{});
  const int R = mh.params().rows, B = mh.params().bands;
  std::vector<uint64_t> sig(mh.num_hashes());
  for (int i = 0; i < R; ++i) sig[i] = sig[R + i] = 1000 + i;  // bands 0 and 1 identical
  for (int i = 2 * R; i < B * R; ++i) sig[i] = i * 0x9e3779b97f4a7c15ull;
  std::vector<uint64_t> k(B), k2(B);
  mh.band_keys(sig.data(), k.data());
  EXPECT_NE(k[0], k[1]);  // same rows, different band: no cross-band collision
  for (int b = 0; b < B; ++b) {
    auto s2 = sig;
    s2[b * R + (b % R)] ^= 1;  // one value of band b
    mh.band_keys(s2.data(), k2.data());
    for (int c = 0; c < B; ++c) EXPECT_EQ(k[c] == k2[c], c != b) << "band " << b << " key " << c;
  }
}

// The Jaccard estimate is Binomial(112, J) / 112 for random hash functions:
// unbiased, with variance J(1-J)/112. Correlated lanes would inflate the spread.
TEST_P(MinHash, EstimateTracksExactJaccard) {
  MinHasher mh(params());
  std::mt19937_64 rng(3);
  auto vocab = make_vocab(20000, 3);
  double sum_err = 0, sum_sq = 0, sum_var = 0;
  int far = 0;
  const int kPairs = 240;
  std::vector<int> bins(5);
  for (int t = 0; t < kPairs; ++t) {
    auto base = random_doc(300, vocab, rng);
    // Replace a fraction of the words so that J spreads over [0, 1]: a shingle
    // survives with probability (1-frac)^5 =: s, and J = s / (2 - s).
    auto other = base;
    double target = (t + 0.5) / kPairs;
    double frac = 1 - std::pow(2 * target / (1 + target), 0.2);
    for (auto& w : other)
      if (std::uniform_real_distribution<double>(0, 1)(rng) < frac) w = vocab[rng() % vocab.size()];
    double j = exact_jaccard(naive_shingles(join(base), 5), naive_shingles(join(other), 5));
    bins[std::min(4, int(j * 5))]++;
    double err = estimate(sketch(mh, join(base)), sketch(mh, join(other))) - j;
    sum_err += err;
    sum_sq += err * err;
    sum_var += j * (1 - j) / 112;
    far += std::abs(err) > 0.1;
  }
  for (int b = 0; b < 5; ++b) EXPECT_GE(bins[b], 20) << "J bin " << b;  // the J spread
  double mean = sum_err / kPairs, rms_ratio = std::sqrt(sum_sq / sum_var);
  std::printf("[minhash] %d pairs: mean error %+.4f, rms/theory %.3f, |err|>0.1: %d\n", kPairs,
              mean, rms_ratio, far);
  EXPECT_LT(std::abs(mean), 0.01);
  EXPECT_GT(rms_ratio, 0.75);
  EXPECT_LT(rms_ratio, 1.3);
  EXPECT_LE(far, kPairs * 6 / 100);
}

// The acceptance test: candidates = any equal band key, confirmed by the
// estimate >= threshold. Recall >= 0.9 for J >= 0.85; false positives <= 1% for J <= 0.5.
TEST_P(MinHash, LshRecallAndFalsePositiveRate) {
  MinHasher mh(params());
  const double thr = mh.params().threshold;
  std::mt19937_64 rng(5);
  auto vocab = make_vocab(20000, 4);
  int hi = 0, hi_found = 0, lo = 0, lo_found = 0;
  int lo_band = 0, mid = 0, mid_band = 0;
  double mid_expected = 0;
  for (int t = 0; hi < 250 || lo < 250 || mid < 1000; ++t) {
    auto base = random_doc(300, vocab, rng);
    // 0..5 edits: near duplicates; 20..34: J around 0.35..0.55.
    int edits = (hi < 250 && t % 2 == 0) ? int(rng() % 6) : 20 + int(rng() % 15);
    auto other = mutate(base, edits, vocab, rng);
    double j = exact_jaccard(naive_shingles(join(base), 5), naive_shingles(join(other), 5));
    Doc a = sketch(mh, join(base)), b = sketch(mh, join(other));
    bool band = any_band_equal(a, b);
    bool found = band && estimate(a, b) >= thr;
    if (j >= 0.85) hi++, hi_found += found;
    if (j <= 0.5) lo++, lo_found += found, lo_band += band;
    if (j >= 0.45 && j <= 0.5) {
      mid++, mid_band += band;
      mid_expected += 1 - std::pow(1 - std::pow(j, 8), 14);
    }
  }
  std::printf("[minhash] J>=0.85: %d/%d found; J<=0.5: %d/%d confirmed (%d band matches); "
              "J in [0.45,0.5]: %d/%d band matches (S-curve predicts %.1f)\n",
              hi_found, hi, lo_found, lo, lo_band, mid_band, mid, mid_expected);
  EXPECT_GE(hi_found, 0.9 * hi);
  EXPECT_LE(lo_found, 0.01 * lo);
  // Banding alone lets ~2-5% of J~0.5 pairs through: the estimate check is what
  // meets the 1% bound. Observed matches follow the S-curve 1-(1-J^8)^14.
  EXPECT_GT(mid_band, 0.01 * mid);
  EXPECT_GT(mid_band, 0.5 * mid_expected);
  EXPECT_LT(mid_band, 1.5 * mid_expected);
}

// Throughput on ~50 MB of random English-like text; run with
// --gtest_also_run_disabled_tests --gtest_filter='*DISABLED_Speed*'.
TEST(MinHashLib, DISABLED_Speed) {
  std::mt19937_64 rng(42);
  std::vector<std::string> docs;
  size_t bytes = 0;
  while (bytes < (50u << 20)) {
    std::string d;
    size_t target = 1000 + rng() % 8000;
    while (d.size() < target) {
      int len = 2 + rng() % 9;
      for (int k = 0; k < len; ++k) d += char('a' + rng() % 26);
      if (rng() % 12 == 0) d[d.size() - len] -= 32;
      d += (rng() % 15 == 0) ? ". " : " ";
    }
    bytes += d.size();
    docs.push_back(std::move(d));
  }
  MinHasher mh(MinHashParams{});
  std::vector<uint64_t> sig(mh.num_hashes());
  auto t0 = std::chrono::steady_clock::now();
  size_t shingles = 0;
  for (const auto& d : docs) shingles += mh.signature(d, sig.data());
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[minhash] %.1f MB in %.3f s: %.1f MB/s (datatrove ~0.85 MB/s: %.0fx), %.1f ns/shingle\n",
              bytes / 1e6, s, bytes / 1e6 / s, bytes / 1e6 / s / 0.85, s * 1e9 / shingles);
}

}  // namespace
}  // namespace crucible::data
