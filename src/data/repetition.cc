// Gopher repetition rules (data/quality.h).
#include "data/quality.h"

#include <xxhash.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "data/quality_text.h"

namespace crucible::data {
namespace {

using namespace quality_detail;

// ---- repetition helpers ----

inline uint64_t mix64(uint64_t x) {  // murmur3's finaliser: spreads a hash over all bits
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

// Open-addressing hash table keyed by a 64-bit hash plus an exact equality check
// against an item index, so hash collisions cost a comparison, never a wrong answer.
// Reused across calls (thread_local) to keep allocation off the per-document path.
class ItemTable {
 public:
  struct Slot {
    uint64_t hash;  // 0: empty
    uint32_t item;  // index of the first occurrence
    uint32_t count;
  };

  void reset(size_t items) {
    size_t cap = 16;
    while (cap < 2 * items) cap <<= 1;
    slots_.assign(cap, Slot{0, 0, 0});
    mask_ = cap - 1;
  }

  // Returns the slot for the item equal to `item` (eq(a, b) compares items), inserting
  // `item` with count 0 when no equal item is present.
  template <class Eq>
  Slot& find_or_insert(uint64_t hash, uint32_t item, Eq&& eq) {
    if (hash == 0) hash = 1;
    size_t i = mix64(hash) & mask_;
    for (;;) {
      Slot& s = slots_[i];
      if (s.hash == 0) {
        s = Slot{hash, item, 0};
        return s;
      }
      if (s.hash == hash && eq(s.item, item)) return s;
      i = (i + 1) & mask_;
    }
  }

  const std::vector<Slot>& slots() const { return slots_; }

 private:
  std::vector<Slot> slots_;
  size_t mask_ = 0;
};

struct DupStats {
  size_t elements = 0;  // elements equal to an earlier one
  size_t bytes = 0;     // their bytes
};

DupStats find_duplicates(const std::vector<std::string_view>& elems, ItemTable* table) {
  DupStats d;
  table->reset(elems.size());
  auto eq = [&](uint32_t a, uint32_t b) { return elems[a] == elems[b]; };
  for (uint32_t i = 0; i < elems.size(); ++i) {
    auto& slot = table->find_or_insert(XXH3_64bits(elems[i].data(), elems[i].size()), i, eq);
    if (slot.count++ > 0) {
      ++d.elements;
      d.bytes += elems[i].size();
    }
  }
  return d;
}

// Word n-grams of one text: the words, a hash per word, and prefix sums from which
// any n-gram's hash and byte length come in O(1).
struct NgramIndex {
  std::string_view text;
  std::vector<Span> words;
  std::vector<uint64_t> prefix_hash;  // P[i+1] = P[i] * kBase + h(word i)  (mod 2^64)
  std::vector<uint64_t> pow;          // kBase^k
  std::vector<uint64_t> prefix_len;   // bytes of words [0, i)
  static constexpr uint64_t kBase = 0x9E3779B97F4A7C15ULL;

  void build(std::string_view t) {
    text = t;
    split_words(t, &words);
    const size_t w = words.size();
    prefix_hash.resize(w + 1);
    prefix_len.resize(w + 1);
    prefix_hash[0] = prefix_len[0] = 0;
    for (size_t i = 0; i < w; ++i) {
      prefix_hash[i + 1] =
          prefix_hash[i] * kBase + XXH3_64bits(t.data() + words[i].begin, words[i].len);
      prefix_len[i + 1] = prefix_len[i] + words[i].len;
    }
    pow.resize(11);
    pow[0] = 1;
    for (size_t k = 1; k < pow.size(); ++k) pow[k] = pow[k - 1] * kBase;
  }
  std::string_view word(size_t i) const { return text.substr(words[i].begin, words[i].len); }
  uint64_t hash(size_t i, int n) const {
    return prefix_hash[i + n] - prefix_hash[i] * pow[n] + static_cast<uint64_t>(n);
  }
  // Bytes of the n-gram joined by single spaces.
  size_t length(size_t i, int n) const { return prefix_len[i + n] - prefix_len[i] + (n - 1); }
  bool equal(size_t a, size_t b, int n) const {
    for (int k = 0; k < n; ++k)
      if (word(a + k) != word(b + k)) return false;
    return true;
  }
};

// Pruning: an n-gram can only repeat where its (n-1)-gram prefix repeats, so each
// level counts only the positions the level below flagged (`cand`; null: all), and
// flags in `rep` the positions whose n-gram occurs at least twice. On ordinary prose
// most positions drop out after the 2- or 3-grams, which keeps the nine n-gram rules
// near the cost of one pass over the words.

// Counts n-grams at the candidate positions; returns the char share numerator of the
// most frequent one (count >= 2; ties: the longest) and fills `rep`.
size_t count_ngrams(const NgramIndex& ix, int n, const std::vector<uint8_t>* cand,
                    std::vector<uint8_t>* rep, ItemTable* table, std::vector<uint32_t>* slot_of) {
  const size_t w = ix.words.size();
  rep->assign(w + 1, 0);
  if (w < static_cast<size_t>(n)) return 0;
  const size_t grams = w - n + 1;
  size_t m = 0;
  for (size_t i = 0; i < grams; ++i) m += !cand || (*cand)[i];
  if (m == 0) return 0;
  table->reset(m);
  slot_of->assign(grams, 0);
  auto eq = [&](uint32_t a, uint32_t b) { return ix.equal(a, b, n); };
  for (uint32_t i = 0; i < grams; ++i) {
    if (cand && !(*cand)[i]) continue;
    auto& slot = table->find_or_insert(ix.hash(i, n), i, eq);
    ++slot.count;
    (*slot_of)[i] = static_cast<uint32_t>(&slot - table->slots().data());
  }
  for (size_t i = 0; i < grams; ++i)
    if (!cand || (*cand)[i]) (*rep)[i] = table->slots()[(*slot_of)[i]].count >= 2;
  uint32_t best_count = 2;
  size_t best_len = 0;
  for (const auto& s : table->slots()) {
    if (s.hash == 0 || s.count < best_count) continue;
    const size_t len = ix.length(s.item, n);
    if (s.count > best_count || len > best_len) {
      best_count = s.count;
      best_len = len;
    }
  }
  return best_len * best_count;  // 0 when no n-gram repeats
}

// Gopher/datatrove's duplicated n-gram bytes: a repeated n-gram's bytes are counted
// once and the walk jumps past it, so overlapping repeats are not counted twice.
// `cand` flags the positions whose k-gram (k <= n) repeats; any other n-gram occurs
// once, so it is neither a repeat nor worth remembering.
size_t dup_ngram_bytes(const NgramIndex& ix, int n, const std::vector<uint8_t>& cand,
                       ItemTable* table) {
  const size_t w = ix.words.size();
  if (w < static_cast<size_t>(n)) return 0;
  const size_t grams = w - n + 1;
  size_t m = 0;
  for (size_t i = 0; i < grams; ++i) m += cand[i];
  if (m == 0) return 0;
  table->reset(m);
  auto eq = [&](uint32_t a, uint32_t b) { return ix.equal(a, b, n); };
  size_t bytes = 0;
  size_t i = 0;
  while (i < grams) {
    if (!cand[i]) {
      ++i;
      continue;
    }
    auto& slot = table->find_or_insert(ix.hash(i, n), static_cast<uint32_t>(i), eq);
    if (slot.count++ > 0) {
      bytes += ix.length(i, n);
      i += n;
    } else {
      i += 1;
    }
  }
  return bytes;
}


}  // namespace

// ---- Gopher repetition ----

Verdict gopher_repetition(std::string_view text, const GopherRepetitionParams& p) {
  if (text.empty()) return Verdict{};
  thread_local ItemTable table;
  thread_local std::vector<std::string_view> elems;
  const double text_bytes = static_cast<double>(text.size());

  elems.clear();
  for_each_line(text, [&](std::string_view line) { elems.push_back(line); });
  const DupStats lines = find_duplicates(elems, &table);
  const double n_lines = static_cast<double>(elems.size());

  elems.clear();
  for_each_paragraph(text, [&](std::string_view para) { elems.push_back(para); });
  const DupStats paras = find_duplicates(elems, &table);
  const double n_paras = static_cast<double>(elems.size());

  if (n_lines > 0) {
    const double f = static_cast<double>(lines.elements) / n_lines;
    if (p.max_dup_line_frac >= 0 && f > p.max_dup_line_frac)
      return removed("gopher_repetition.dup_line_frac", f, p.max_dup_line_frac);
  }
  if (n_paras > 0) {
    const double f = static_cast<double>(paras.elements) / n_paras;
    if (p.max_dup_para_frac >= 0 && f > p.max_dup_para_frac)
      return removed("gopher_repetition.dup_para_frac", f, p.max_dup_para_frac);
  }
  {
    const double f = static_cast<double>(lines.bytes) / text_bytes;
    if (p.max_dup_line_char_frac >= 0 && f > p.max_dup_line_char_frac)
      return removed("gopher_repetition.dup_line_char_frac", f, p.max_dup_line_char_frac);
  }
  {
    const double f = static_cast<double>(paras.bytes) / text_bytes;
    if (p.max_dup_para_char_frac >= 0 && f > p.max_dup_para_char_frac)
      return removed("gopher_repetition.dup_para_char_frac", f, p.max_dup_para_char_frac);
  }

  thread_local NgramIndex ix;
  thread_local std::vector<uint8_t> rep_prev, rep_next;
  thread_local std::vector<uint32_t> slot_of;
  ix.build(text);
  static constexpr std::string_view kTopRule[] = {
      "gopher_repetition.top_2gram", "gopher_repetition.top_3gram", "gopher_repetition.top_4gram"};
  const double top_max[] = {p.max_top_2gram, p.max_top_3gram, p.max_top_4gram};
  // The counts run even for a rule that is off: their flags prune the next level.
  for (int k = 0; k < 3; ++k) {
    const size_t top =
        count_ngrams(ix, k + 2, k == 0 ? nullptr : &rep_prev, &rep_next, &table, &slot_of);
    std::swap(rep_prev, rep_next);
    if (top_max[k] < 0) continue;
    const double f = static_cast<double>(top) / text_bytes;
    if (f > top_max[k]) return removed(kTopRule[k], f, top_max[k]);
  }
  // rep_prev: positions whose 4-gram repeats.
  static constexpr std::string_view kDupRule[] = {
      "gopher_repetition.dup_5gram", "gopher_repetition.dup_6gram", "gopher_repetition.dup_7gram",
      "gopher_repetition.dup_8gram", "gopher_repetition.dup_9gram", "gopher_repetition.dup_10gram"};
  for (int k = 0; k < 6; ++k) {
    if (p.max_dup_ngram[k] < 0) continue;
    const double f = static_cast<double>(dup_ngram_bytes(ix, k + 5, rep_prev, &table)) / text_bytes;
    if (f > p.max_dup_ngram[k]) return removed(kDupRule[k], f, p.max_dup_ngram[k]);
  }
  return Verdict{};
}


}  // namespace crucible::data
