#include "data/gpt2_pretokenize.h"

#include <unicode/uchar.h>
#include <unicode/utf8.h>

#include <cstdint>

namespace crucible::data {
namespace {

enum class Kind : uint8_t { kLetter, kNumber, kSpace /* U+0020 */, kWhite /* other \s */, kOther };

struct Char {
  uint32_t begin;  // byte offset in the text
  Kind kind;
  char ascii;  // the character when it is ASCII, else 0 (for contractions)
};

Kind kind_of(UChar32 c) {
  if (c < 0) return Kind::kOther;  // an invalid byte
  if (c == ' ') return Kind::kSpace;
  if (u_isUWhiteSpace(c)) return Kind::kWhite;
  const uint32_t gc = U_GET_GC_MASK(c);
  if (gc & U_GC_L_MASK) return Kind::kLetter;
  if (gc & U_GC_N_MASK) return Kind::kNumber;
  return Kind::kOther;
}

bool white(Kind k) { return k == Kind::kSpace || k == Kind::kWhite; }

}  // namespace

std::vector<std::string_view> gpt2_pretokenize(std::string_view text) {
  std::vector<Char> cs;
  cs.reserve(text.size());
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const int32_t len = int32_t(text.size());
  for (int32_t i = 0; i < len;) {
    const int32_t begin = i;
    UChar32 c;
    U8_NEXT(s, i, len, c);
    cs.push_back({uint32_t(begin), kind_of(c), c >= 0 && c < 0x80 ? char(c) : '\0'});
  }
  const size_t n = cs.size();
  auto at = [&](size_t k) { return k < n ? cs[k].begin : uint32_t(text.size()); };
  // The run of characters from k that `pred` accepts: its end.
  auto run = [&](size_t k, auto pred) {
    while (k < n && pred(cs[k].kind)) ++k;
    return k;
  };
  std::vector<std::string_view> out;
  for (size_t i = 0; i < n;) {
    size_t end = i;
    // 's 't 're 've 'm 'll 'd (lowercase, as the regex has them)
    if (cs[i].ascii == '\'' && i + 1 < n) {
      const char a = cs[i + 1].ascii, b = i + 2 < n ? cs[i + 2].ascii : '\0';
      if (a == 's' || a == 't' || a == 'm' || a == 'd')
        end = i + 2;
      else if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
        end = i + 3;
    }
    if (end == i) {
      // ` ?X+` for X in L, N, [^\s L N]: an optional space before the run.
      const size_t k = cs[i].kind == Kind::kSpace && i + 1 < n ? i + 1 : i;
      const Kind x = cs[k].kind;
      if (x == Kind::kLetter || x == Kind::kNumber) {
        end = run(k, [x](Kind c) { return c == x; });
      } else if (x == Kind::kOther) {
        end = run(k, [](Kind c) { return c == Kind::kOther; });
      } else {
        // \s+(?!\S): whitespace up to the end, or all of it but the last
        // character before a non-space (which joins what follows); \s+ when
        // that leaves nothing.
        const size_t w = run(i, white);
        end = w == n || w - i == 1 ? w : w - 1;
      }
    }
    out.push_back(text.substr(at(i), at(end) - at(i)));
    i = end;
  }
  return out;
}

}  // namespace crucible::data
