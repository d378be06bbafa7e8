// Gopher quality rules (data/quality.h).
#include "data/quality.h"

#include <algorithm>
#include <cstdint>

#include "data/quality_text.h"

namespace crucible::data {
namespace {

using namespace quality_detail;

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


}  // namespace crucible::data
