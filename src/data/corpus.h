// Corpus readers: turn files on disk into a list of documents (UTF-8 strings).
// Formats: Debian `fortunes` files (entries separated by lines holding just `%`),
// plain text (one document per file) and JSONL (one {"text": ...} object a line).
// Invariants of the result: every document is valid UTF-8 (invalid byte sequences are
// replaced by U+FFFD and counted), none is empty or whitespace-only, and the order is
// deterministic (paths in the order given; directories walked in sorted path order).
// Stateless free functions; safe to call from several threads at once.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace crucible::data {

enum class CorpusFormat { kAuto, kFortunes, kText, kJsonl };

// "auto", "fortunes", "text", "jsonl"; anything else is an error naming the value.
Result<CorpusFormat> parse_corpus_format(std::string_view name);

struct CorpusStats {
  size_t files = 0;          // files read
  size_t documents = 0;      // documents returned
  size_t bytes = 0;          // UTF-8 bytes of the documents returned
  size_t invalid_utf8 = 0;   // bad byte sequences repaired (each became one U+FFFD)
  size_t skipped_empty = 0;  // empty or whitespace-only documents dropped
};

// Reads every document from `paths`: files, or directories walked recursively in sorted
// order. The walk skips hidden entries (names starting with '.'), symlinks (Debian's
// fortunes/*.u8 are symlinks to the text files; following them would read every entry
// twice) and `*.dat` files (fortune's binary index files). A path named explicitly is
// read even if it is a symlink or a .dat file. kAuto picks a format per file: `.jsonl` /
// `.json` -> jsonl; a file with a line that is exactly `%` -> fortunes; otherwise text.
// A fortune is the text between `%` lines without its trailing line breaks; a text
// document is the whole file, byte for byte; a JSONL document is the "text" field.
// Errors: a missing path (not_found), an unreadable file (io), a bad JSONL line
// ("[data] FILE:LINE: ..."), and a corpus that yields no document (invalid).
// `stats`, if given, is overwritten.
Result<std::vector<std::string>> read_corpus(const std::vector<std::string>& paths,
                                             CorpusFormat format, CorpusStats* stats = nullptr);

// Replaces each invalid UTF-8 sequence (bad lead byte, stray continuation byte,
// truncated sequence, overlong form, surrogate, code point > U+10FFFF) by U+FFFD, one
// U+FFFD per maximal invalid subpart (Unicode's recommended practice, also what Python's
// errors="replace" and WHATWG decoders do). Sets *repaired, if given, to the number of
// replacements. Valid input is returned unchanged.
std::string sanitize_utf8(std::string_view s, size_t* repaired = nullptr);

}  // namespace crucible::data
