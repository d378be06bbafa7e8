// Text clean-up, the first curation stage: Unicode NFC normalisation (ICU) and
// whitespace clean-up, so that later stages (exact hashes, shingles, quality
// rules) see one spelling of the same text.
//
// Whitespace rules (in this order):
//   - "\r\n" and lone "\r" become "\n";
//   - Unicode space separators (U+00A0, U+1680, U+2000..U+200A, U+202F, U+205F,
//     U+3000) become ASCII ' '; zero-width characters (U+200B, U+FEFF) and C0
//     control characters other than '\t' and '\n' (and DEL) are removed;
//   - trailing spaces and tabs of every line are removed;
//   - more than one empty line in a row becomes one empty line (paragraphs stay
//     separated by exactly "\n\n");
//   - leading and trailing whitespace of the whole document is removed.
// Leading indentation inside the document is kept (poems, code, tables).
// Input must be valid UTF-8 (read_corpus guarantees it); output is valid UTF-8.
// Thread-safe: ICU's normaliser instance is immutable and shared.
#pragma once
#include <string>
#include <string_view>

namespace crucible::data {

struct CleanOptions {
  bool nfc = true;         // Unicode normalisation form C
  bool whitespace = true;  // the whitespace rules above
};

// Returns the cleaned text. ASCII-only input skips ICU (ASCII is always NFC).
std::string clean_text(std::string_view utf8, const CleanOptions& opts = {});

}  // namespace crucible::data
