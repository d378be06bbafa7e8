// C4 line filters (data/quality.h).
#include "data/quality.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "data/quality_text.h"

namespace crucible::data {
namespace {

using namespace quality_detail;

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
