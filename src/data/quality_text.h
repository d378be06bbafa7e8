// Text helpers shared by the quality filters (quality.cc, repetition.cc,
// c4.cc): byte classes, word and line splitting. Internal to src/data.
#pragma once
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

#include "data/quality.h"

namespace crucible::data::quality_detail {

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
inline constexpr ByteTable kBytes;

inline uint8_t byte_class(char c) { return kBytes.cls[static_cast<unsigned char>(c)]; }
inline bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

// A word: [begin, begin + len) in the text. Words are maximal runs of non-space bytes.
struct Span {
  uint32_t begin;
  uint32_t len;
};

// Appends the words of `text` to `words` (cleared first).
inline void split_words(std::string_view text, std::vector<Span>* words) {
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

inline Verdict removed(std::string_view rule, double value, double threshold) {
  return Verdict{false, rule, value, threshold};
}

}  // namespace crucible::data::quality_detail
