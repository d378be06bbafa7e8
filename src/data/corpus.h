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

// The files read_corpus reads for `paths`, in corpus order (the walk rules above).
// A directory written by `crucible curate` (it holds a report.json with schema
// "crucible-curate/1") contributes exactly the shards that report lists.
Result<std::vector<std::string>> list_corpus_files(const std::vector<std::string>& paths);

// The format kAuto picks for a file, from its name and its content (or a prefix
// of it: a fortunes file shows a `%` line within its first entries).
CorpusFormat detect_corpus_format(const std::string& path, std::string_view content);

// Calls fn(offset, entry) for each fortune of `content` (which starts at an
// entry boundary), offset being where the entry starts in `content`. Entries are
// as read_corpus returns them, before UTF-8 repair; blank ones are passed too.
template <typename Fn>
void for_each_fortune(std::string_view content, Fn&& fn);

// Replaces each invalid UTF-8 sequence (bad lead byte, stray continuation byte,
// truncated sequence, overlong form, surrogate, code point > U+10FFFF) by U+FFFD, one
// U+FFFD per maximal invalid subpart (Unicode's recommended practice, also what Python's
// errors="replace" and WHATWG decoders do). Sets *repaired, if given, to the number of
// replacements. Valid input is returned unchanged.
std::string sanitize_utf8(std::string_view s, size_t* repaired = nullptr);
// Appends code point c (<= U+10FFFF, not a surrogate) as UTF-8.
void append_utf8(std::string& out, uint32_t c);

namespace detail {
// for_each_fortune's implementation, not a template.
void for_each_fortune(std::string_view content,
                      void (*fn)(void* ctx, size_t offset, std::string_view entry), void* ctx);
}  // namespace detail

template <typename Fn>
void for_each_fortune(std::string_view content, Fn&& fn) {
  detail::for_each_fortune(
      content,
      [](void* ctx, size_t offset, std::string_view entry) { (*static_cast<Fn*>(ctx))(offset, entry); },
      &fn);
}

}  // namespace crucible::data
