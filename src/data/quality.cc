#include "data/quality.h"

#include <xxhash.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

namespace crucible::data {
namespace {

// ---- byte classes ----

enum : uint8_t { kSpace = 1, kAlpha = 2, kDigit = 4, kHigh = 8, kPunct = 16 };

struct ByteTable {
  uint8_t cls[256] = {};
  constexpr ByteTable() {
    cls[' '] = cls['\t'] = cls['\n'] = cls['\r'] = kSpace;
    for (int c = 'a'; c <= 'z'; ++c) cls[c] = kAlpha;
    for (int c = 'A'; c <= 'Z'; ++c) cls[c] = kAlpha;
    for (int c = '0'; c <= '9'; ++c) cls[c] = kDigit;
    for (int c = 0x80; c < 0x100; ++c) cls[c] = kHigh;
    for (int c = 0x21; c < 0x7F; ++c)
      if (cls[c] == 0) cls[c] = kPunct;
  }
};
constexpr ByteTable kBytes;

inline uint8_t byte_class(char c) { return kBytes.cls[static_cast<unsigned char>(c)]; }
inline bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

// A word: [begin, begin + len) in the text. Words are maximal runs of non-space bytes.
struct Span {
  uint32_t begin;
  uint32_t len;
};

// Appends the words of `text` to `words` (cleared first).
void split_words(std::string_view text, std::vector<Span>* words) {
  words->clear();
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    while (i < n && byte_class(text[i]) == kSpace) ++i;
    if (i == n) break;
    const size_t b = i;
    while (i < n && byte_class(text[i]) != kSpace) ++i;
    words->push_back({static_cast<uint32_t>(b), static_cast<uint32_t>(i - b)});
  }
}

// Calls fn(line) for each non-empty piece of `text` between '\n'.
template <class Fn>
void for_each_line(std::string_view text, Fn&& fn) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    if (nl > pos) fn(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
}

// Calls fn(paragraph) for each non-empty piece of `text` between runs of two or more
// '\n'. A single '\n' at either end of a piece belongs to the separator, not the piece.
template <class Fn>
void for_each_paragraph(std::string_view text, Fn&& fn) {
  auto emit = [&](std::string_view piece) {
    while (!piece.empty() && piece.back() == '\n') piece.remove_suffix(1);
    while (!piece.empty() && piece.front() == '\n') piece.remove_prefix(1);
    if (!piece.empty()) fn(piece);
  };
  size_t start = 0;
  size_t pos = 0;
  const size_t n = text.size();
  while (pos < n) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) break;
    size_t end = nl;
    while (end < n && text[end] == '\n') ++end;
    if (end - nl >= 2) {
      if (nl > start) emit(text.substr(start, nl - start));
      start = end;
    }
    pos = end;
  }
  if (start < n) emit(text.substr(start));
}

inline bool starts_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && std::memcmp(s.data(), p.data(), p.size()) == 0;
}
inline bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() &&
         std::memcmp(s.data() + s.size() - p.size(), p.data(), p.size()) == 0;
}

constexpr std::string_view kEllipsis = "\xE2\x80\xA6";  // U+2026 "…"

// ---- Gopher quality helpers ----

// The bullets of the brief: • ‣ ⁃ ◦ ▪ ▫ – - * ·
bool starts_with_bullet(std::string_view line) {
  size_t i = 0;
  while (i < line.size() && is_blank(line[i])) ++i;
  const std::string_view s = line.substr(i);
  if (s.empty()) return false;
  if (s[0] == '-' || s[0] == '*') return true;
  static constexpr std::string_view kBullets[] = {
      "\xE2\x80\xA2",  // U+2022 •
      "\xE2\x80\xA3",  // U+2023 ‣
      "\xE2\x81\x83",  // U+2043 ⁃
      "\xE2\x97\xA6",  // U+25E6 ◦
      "\xE2\x96\xAA",  // U+25AA ▪
      "\xE2\x96\xAB",  // U+25AB ▫
      "\xE2\x80\x93",  // U+2013 –
      "\xC2\xB7",      // U+00B7 ·
  };
  for (std::string_view b : kBullets)
    if (starts_with(s, b)) return true;
  return false;
}

bool ends_with_ellipsis(std::string_view line) {
  while (!line.empty() && is_blank(line.back())) line.remove_suffix(1);
  return ends_with(line, "...") || ends_with(line, kEllipsis);
}

// Strips punctuation from both ends of a word: ASCII punctuation, and the quotes and
// dashes of General Punctuation (U+2010..U+203F, UTF-8 E2 80 90..E2 80 BF) and « »,
// so that "“The" and "the," both read as "the".
std::string_view strip_punct(std::string_view w) {
  for (;;) {
    if (!w.empty() && byte_class(w.front()) == kPunct) {
      w.remove_prefix(1);
    } else if (w.size() >= 3 && static_cast<unsigned char>(w[0]) == 0xE2 &&
               static_cast<unsigned char>(w[1]) == 0x80 &&
               static_cast<unsigned char>(w[2]) >= 0x90) {
      w.remove_prefix(3);
    } else if (w.size() >= 2 && static_cast<unsigned char>(w[0]) == 0xC2 &&
               (static_cast<unsigned char>(w[1]) == 0xAB ||
                static_cast<unsigned char>(w[1]) == 0xBB)) {
      w.remove_prefix(2);
    } else {
      break;
    }
  }
  for (;;) {
    const size_t n = w.size();
    if (n > 0 && byte_class(w.back()) == kPunct) {
      w.remove_suffix(1);
    } else if (n >= 3 && static_cast<unsigned char>(w[n - 3]) == 0xE2 &&
               static_cast<unsigned char>(w[n - 2]) == 0x80 &&
               static_cast<unsigned char>(w[n - 1]) >= 0x90) {
      w.remove_suffix(3);
    } else if (n >= 2 && static_cast<unsigned char>(w[n - 2]) == 0xC2 &&
               (static_cast<unsigned char>(w[n - 1]) == 0xAB ||
                static_cast<unsigned char>(w[n - 1]) == 0xBB)) {
      w.remove_suffix(2);
    } else {
      break;
    }
  }
  return w;
}

bool is_stop_word(std::string_view word) {
  const std::string_view w = strip_punct(word);
  if (w.size() < 2 || w.size() > 4) return false;
  char low[4];
  for (size_t i = 0; i < w.size(); ++i) {
    const char c = w[i];
    low[i] = (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c;
  }
  const std::string_view l(low, w.size());
  return l == "the" || l == "be" || l == "to" || l == "of" || l == "and" || l == "that" ||
         l == "have" || l == "with";
}

inline Verdict removed(std::string_view rule, double value, double threshold) {
  return Verdict{false, rule, value, threshold};
}

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

// ---- C4 helpers ----

// ASCII case-insensitive substring search; `needle` is lowercase.
bool contains_icase(std::string_view hay, std::string_view needle) {
  if (needle.size() > hay.size()) return false;
  const char first = needle[0];
  for (size_t i = 0; i + needle.size() <= hay.size(); ++i) {
    char c = hay[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
    if (c != first) continue;
    size_t k = 1;
    for (; k < needle.size(); ++k) {
      char d = hay[i + k];
      if (d >= 'A' && d <= 'Z') d = static_cast<char>(d + 32);
      if (d != needle[k]) break;
    }
    if (k == needle.size()) return true;
  }
  return false;
}

size_t count_words(std::string_view s) {
  size_t n = 0;
  bool in_word = false;
  for (char c : s) {
    const bool space = byte_class(c) == kSpace;
    if (!space && !in_word) ++n;
    in_word = !space;
  }
  return n;
}

bool has_terminal_punct(std::string_view line) {
  while (!line.empty() && is_blank(line.back())) line.remove_suffix(1);
  if (line.empty() || ends_with(line, "...")) return false;
  const char c = line.back();
  if (c == '.' || c == '!' || c == '?' || c == '"' || c == '\'') return true;
  return ends_with(line, "\xE2\x80\x99") || ends_with(line, "\xE2\x80\x9D");  // ’ ”
}

// Sentences of one kept line: the '.', '!' and '?' followed by whitespace or the end of
// the line (so "..." ends one sentence and "3.14" none), at least 1 for a non-blank
// line. A simple stand-in for C4's sentence tokenizer, enough for a min_sentences rule.
size_t count_sentences(std::string_view line) {
  size_t n = 0;
  bool blank = true;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (byte_class(c) != kSpace) blank = false;
    if ((c == '.' || c == '!' || c == '?') &&
        (i + 1 == line.size() || byte_class(line[i + 1]) == kSpace))
      ++n;
  }
  if (blank) return 0;
  return std::max<size_t>(n, 1);
}

}  // namespace

// ---- Gopher quality ----

Verdict gopher_quality(std::string_view text, const GopherQualityParams& p) {
  size_t words = 0;          // all words
  size_t content_words = 0;  // non-symbol words
  size_t content_bytes = 0;  // their bytes
  size_t alpha_words = 0;    // words with a letter
  size_t stop_words = 0;
  size_t hashes = 0;    // '#' bytes
  size_t ellipses = 0;  // non-overlapping "..." plus "…"

  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    while (i < n && byte_class(text[i]) == kSpace) ++i;
    if (i == n) break;
    const size_t b = i;
    uint8_t classes = 0;
    while (i < n) {
      const char c = text[i];
      const uint8_t cls = byte_class(c);
      if (cls == kSpace) break;
      classes |= cls;
      if (cls == kPunct) {
        if (c == '#') {
          ++hashes;
        } else if (c == '.') {
          // A run of k dots holds k / 3 non-overlapping "..." (Python's str.count).
          size_t e = i;
          while (e < n && text[e] == '.') ++e;
          ellipses += (e - i) / 3;
          i = e;
          continue;
        }
      } else if (cls == kHigh && c == '\xE2' && i + 2 < n && text[i + 1] == '\x80' &&
                 text[i + 2] == '\xA6') {
        ++ellipses;
      }
      ++i;
    }
    const size_t len = i - b;
    ++words;
    if (classes & (kAlpha | kDigit | kHigh)) {
      ++content_words;
      content_bytes += len;
    }
    if (classes & (kAlpha | kHigh)) ++alpha_words;
    if (len >= 2 && is_stop_word(text.substr(b, len))) ++stop_words;
  }

  const double cw = static_cast<double>(content_words);
  if (p.min_words > 0 && cw < p.min_words)
    return removed("gopher_quality.min_words", cw, p.min_words);
  if (p.max_words >= 0 && cw > p.max_words)
    return removed("gopher_quality.max_words", cw, p.max_words);
  // Ratio rules need a denominator; a text without words is the word-count rules' case.
  if (content_words > 0) {
    const double mean = static_cast<double>(content_bytes) / cw;
    if (p.min_mean_word_length > 0 && mean < p.min_mean_word_length)
      return removed("gopher_quality.mean_word_length", mean, p.min_mean_word_length);
    if (p.max_mean_word_length >= 0 && mean > p.max_mean_word_length)
      return removed("gopher_quality.mean_word_length", mean, p.max_mean_word_length);
  }
  if (words > 0) {
    const double w = static_cast<double>(words);
    const double hash_ratio = static_cast<double>(hashes) / w;
    if (p.max_hash_ratio >= 0 && hash_ratio > p.max_hash_ratio)
      return removed("gopher_quality.hash_ratio", hash_ratio, p.max_hash_ratio);
    const double ellipsis_ratio = static_cast<double>(ellipses) / w;
    if (p.max_ellipsis_ratio >= 0 && ellipsis_ratio > p.max_ellipsis_ratio)
      return removed("gopher_quality.ellipsis_ratio", ellipsis_ratio, p.max_ellipsis_ratio);
  }
  if (p.max_bullet_lines >= 0 || p.max_ellipsis_lines >= 0) {
    size_t lines = 0, bullet_lines = 0, ellipsis_lines = 0;
    for_each_line(text, [&](std::string_view line) {
      ++lines;
      bullet_lines += starts_with_bullet(line);
      ellipsis_lines += ends_with_ellipsis(line);
    });
    if (lines > 0) {
      const double bullets = static_cast<double>(bullet_lines) / static_cast<double>(lines);
      if (p.max_bullet_lines >= 0 && bullets > p.max_bullet_lines)
        return removed("gopher_quality.bullet_lines", bullets, p.max_bullet_lines);
      const double ell = static_cast<double>(ellipsis_lines) / static_cast<double>(lines);
      if (p.max_ellipsis_lines >= 0 && ell > p.max_ellipsis_lines)
        return removed("gopher_quality.ellipsis_lines", ell, p.max_ellipsis_lines);
    }
  }
  if (words > 0) {
    const double alpha = static_cast<double>(alpha_words) / static_cast<double>(words);
    if (p.min_alpha_words > 0 && alpha < p.min_alpha_words)
      return removed("gopher_quality.alpha_words", alpha, p.min_alpha_words);
  }
  if (p.min_stop_words > 0 && stop_words < static_cast<size_t>(p.min_stop_words))
    return removed("gopher_quality.stop_words", static_cast<double>(stop_words), p.min_stop_words);
  return Verdict{};
}

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

// ---- C4 ----

// Line rules drop lines; page rules then look at the kept text only (as C4's
// clean_page, which checks "lorem ipsum" and '{' on lines that survived the
// punctuation and length rules). Kept lines are copied verbatim.
Verdict c4_filter(std::string& text, const C4Params& p, size_t* lines_removed) {
  static constexpr std::string_view kPolicy[] = {"terms of use", "privacy policy", "cookie policy",
                                                 "uses cookies", "use of cookies", "use cookies"};
  size_t removed_lines = 0;
  size_t sentences = 0;
  bool has_content = false;
  bool lorem = false;
  bool curly = false;
  size_t kept = 0;
  size_t out = 0;  // write position: kept lines are compacted to the front in place
  size_t pos = 0;
  const size_t n = text.size();
  // Lines as Python's splitlines: a final '\n' does not start another (empty) line.
  while (pos < n) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = n;
    const std::string_view line(text.data() + pos, nl - pos);
    bool keep = true;
    if (p.min_words_per_line > 0 && count_words(line) < static_cast<size_t>(p.min_words_per_line))
      keep = false;
    else if (p.terminal_punct && !has_terminal_punct(line))
      keep = false;
    else if (p.drop_javascript && contains_icase(line, "javascript"))
      keep = false;
    else if (p.drop_policy)
      for (std::string_view pol : kPolicy)
        if (contains_icase(line, pol)) {
          keep = false;
          break;
        }
    if (keep) {
      const size_t s = count_sentences(line);
      sentences += s;
      has_content |= s > 0;
      lorem = lorem || (p.drop_lorem_ipsum && contains_icase(line, "lorem ipsum"));
      curly = curly || (p.drop_curly_bracket && line.find('{') != std::string_view::npos);
      if (kept++ > 0) text[out++] = '\n';
      if (out != pos) std::memmove(text.data() + out, text.data() + pos, line.size());
      out += line.size();
    } else {
      ++removed_lines;
    }
    pos = nl + 1;
  }
  text.resize(out);
  if (lines_removed) *lines_removed = removed_lines;

  if (!has_content) return removed("c4.empty", 0, 0);
  if (p.min_sentences > 0 && sentences < static_cast<size_t>(p.min_sentences))
    return removed("c4.min_sentences", static_cast<double>(sentences), p.min_sentences);
  if (lorem) return removed("c4.lorem_ipsum", 1, 0);
  if (curly) return removed("c4.curly_bracket", 1, 0);
  return Verdict{};
}

}  // namespace crucible::data
