// Text samples for the tokenizer parity tests (tests/hf): every document of
// Debian's fortunes corpus that is valid UTF-8, and synthetic strings drawn
// from a deterministic mix of scripts, emoji, combining marks, digits of
// other scripts, U+2581 and every kind of whitespace.
#pragma once
#include <string>
#include <vector>

namespace crucible::testutil {

// The fortunes documents (split at "\n%\n"), at most max_bytes of them.
std::vector<std::string> fortunes_documents(size_t max_bytes = SIZE_MAX);
// n synthetic strings of 1..max_chars characters (seeded: the same every run),
// plus a few fixed edge cases (newlines, runs of spaces, tabs, emoji, CJK, U+2581).
std::vector<std::string> unicode_samples(int n, int max_chars = 120);
// texts as a JSON array file (for hf_side.py).
void write_texts_json(const std::string& path, const std::vector<std::string>& texts);

}  // namespace crucible::testutil
