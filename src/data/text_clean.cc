#include "data/text_clean.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/stringpiece.h>

#include <climits>
#include <cstdint>

namespace crucible::data {
namespace {

// What the whitespace pass does with the character starting at a byte.
enum class Kind : uint8_t {
  kContent,  // copy as is
  kBlank,    // ' ' or '\t' (or a Unicode space separator, written as ' ')
  kNewline,  // '\n', "\r\n" or a lone '\r'
  kDrop,     // zero-width character or control character: removed
};

// Classifies the character at s[i] and returns how many bytes it spans (bytes of a
// multi-byte character that is plain content are copied one at a time: continuation
// bytes 0x80..0xBF never match a lead byte below, so they fall through as content).
inline Kind classify(const unsigned char* s, size_t n, size_t i, size_t* len) {
  const unsigned char c = s[i];
  *len = 1;
  if (c >= 0x21 && c < 0x7F) return Kind::kContent;
  if (c == ' ' || c == '\t') return Kind::kBlank;
  if (c == '\n') return Kind::kNewline;
  if (c == '\r') {
    if (i + 1 < n && s[i + 1] == '\n') *len = 2;
    return Kind::kNewline;
  }
  if (c < 0x80) return Kind::kDrop;  // other C0 controls and DEL
  const size_t left = n - i;
  if (c == 0xC2 && left >= 2 && s[i + 1] == 0xA0) {  // U+00A0 no-break space
    *len = 2;
    return Kind::kBlank;
  }
  if (left < 3) return Kind::kContent;
  const unsigned char c1 = s[i + 1], c2 = s[i + 2];
  Kind k = Kind::kContent;
  if (c == 0xE2 && c1 == 0x80) {
    if (c2 >= 0x80 && c2 <= 0x8A)
      k = Kind::kBlank;  // U+2000..U+200A
    else if (c2 == 0x8B)
      k = Kind::kDrop;  // U+200B zero-width space
    else if (c2 == 0xAF)
      k = Kind::kBlank;  // U+202F narrow no-break space
  } else if (c == 0xE2 && c1 == 0x81 && c2 == 0x9F) {
    k = Kind::kBlank;  // U+205F medium mathematical space
  } else if (c == 0xE1 && c1 == 0x9A && c2 == 0x80) {
    k = Kind::kBlank;  // U+1680 ogham space mark
  } else if (c == 0xE3 && c1 == 0x80 && c2 == 0x80) {
    k = Kind::kBlank;  // U+3000 ideographic space
  } else if (c == 0xEF && c1 == 0xBB && c2 == 0xBF) {
    k = Kind::kDrop;  // U+FEFF zero-width no-break space (BOM)
  }
  if (k != Kind::kContent) *len = 3;
  return k;
}

// The whitespace rules in one pass. Blanks and newlines are held back until the next
// content character decides their fate: before a newline, blanks are trailing (dropped);
// at the start of the document everything held is leading (dropped); at the end of the
// document everything held is trailing (dropped); runs of newlines emit at most two.
std::string clean_whitespace(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  const auto* s = reinterpret_cast<const unsigned char*>(in.data());
  const size_t n = in.size();
  std::string held_blanks;  // ' ' and '\t' since the last content character or newline
  int held_newlines = 0;
  size_t i = 0;
  while (i < n) {
    size_t len;
    switch (classify(s, n, i, &len)) {
      case Kind::kContent: {
        if (!out.empty()) {
          out.append(held_newlines > 2 ? 2 : held_newlines, '\n');
          out += held_blanks;
        }
        held_newlines = 0;
        held_blanks.clear();
        // Copy the run of plain content bytes at once (the common case).
        size_t j = i + 1;
        while (j < n && s[j] >= 0x21 && s[j] < 0x7F) ++j;
        out.append(in.data() + i, j - i);
        len = j - i;
        break;
      }
      case Kind::kBlank:
        held_blanks += (s[i] == '\t') ? '\t' : ' ';
        break;
      case Kind::kNewline:
        held_blanks.clear();
        ++held_newlines;
        break;
      case Kind::kDrop:
        break;
    }
    i += len;
  }
  return out;
}

bool is_ascii(std::string_view s) {
  uint8_t acc = 0;
  for (char c : s) acc |= static_cast<uint8_t>(c);
  return acc < 0x80;
}

// NFC through ICU. Any ICU failure (or a text too long for ICU's int32 lengths) leaves
// the text unchanged: a curation pass must never die on one odd document.
std::string normalize_nfc(std::string text) {
  if (is_ascii(text) || text.size() > static_cast<size_t>(INT32_MAX)) return text;
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* nfc = icu::Normalizer2::getNFCInstance(status);
  if (U_FAILURE(status) || nfc == nullptr) return text;
  const icu::StringPiece piece(text.data(), static_cast<int32_t>(text.size()));
  // Most text is already NFC; the quick check avoids building a second copy.
  if (nfc->isNormalizedUTF8(piece, status) && U_SUCCESS(status)) return text;
  status = U_ZERO_ERROR;
  std::string out;
  out.reserve(text.size());
  icu::StringByteSink<std::string> sink(&out);
  nfc->normalizeUTF8(0, piece, sink, nullptr, status);
  if (U_FAILURE(status)) return text;
  return out;
}

}  // namespace

// The whitespace rules run before NFC, not after: removing a zero-width or control
// character can put a base letter next to a combining mark ("e" U+200B U+0301), and
// only normalising afterwards makes the result NFC (and clean_text idempotent). The
// order changes nothing else: NFC never produces a character the whitespace rules
// touch (no canonical decomposition holds a space or a control character; U+2000 and
// U+2001, which NFC maps to U+2002 and U+2003, are spaces either way).
std::string clean_text(std::string_view utf8, const CleanOptions& opts) {
  std::string text = opts.whitespace ? clean_whitespace(utf8) : std::string(utf8);
  if (opts.nfc) text = normalize_nfc(std::move(text));
  return text;
}

}  // namespace crucible::data
