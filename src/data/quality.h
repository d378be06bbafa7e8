// Document quality filters for curation: the Gopher quality and repetition rules
// (Rae et al. 2021, "Scaling Language Models: Methods, Analysis & Insights from
// Training Gopher", appendix A.1.1, table A1) and the C4 line filters (Raffel et
// al. 2020, section 2.2). docs/curation.md lists every rule, its default and its
// source, and where crucible's reading of a rule differs from datatrove's.
//
// Definitions shared by the rules (all lengths are UTF-8 bytes):
//   - words: maximal runs of non-whitespace (space, \t, \n, \r) bytes;
//   - a symbol word is a word with no letter or digit (e.g. "-", "...", "#");
//     word counts and mean word length count non-symbol words only;
//   - a word "has a letter" when it holds an ASCII letter or any non-ASCII byte;
//   - lines: the text split at '\n', empty lines dropped (Gopher's \n+ split);
//   - paragraphs: the text split at two or more '\n', empty ones dropped;
//   - n-grams (repetition rules): n consecutive words joined by one space; the
//     character share of an n-gram is its length times its count over the
//     total length of the text. An n-gram that occurs once is not a repetition:
//     the top n-gram rule only fires for an n-gram occurring at least twice.
// Each rule is off when its threshold is negative (for a "max" rule) or when
// its min is 0 (for a "min" rule), so every rule is switchable from config.
// Stateless; thread-safe.
#pragma once
#include <string>
#include <string_view>

namespace crucible::data {

struct GopherQualityParams {
  int min_words = 50;                     // non-symbol words
  int max_words = 100000;
  double min_mean_word_length = 3;        // over non-symbol words
  double max_mean_word_length = 10;
  double max_hash_ratio = 0.1;            // count("#") / words
  double max_ellipsis_ratio = 0.1;        // (count("...") + count("…")) / words
  double max_bullet_lines = 0.9;          // share of lines starting with a bullet
  double max_ellipsis_lines = 0.3;        // share of lines ending with "..." or "…"
  double min_alpha_words = 0.8;           // share of words (all words) with a letter
  int min_stop_words = 2;                 // occurrences of the/be/to/of/and/that/have/with
};

struct GopherRepetitionParams {
  double max_dup_line_frac = 0.3;        // duplicate lines / lines
  double max_dup_para_frac = 0.3;        // duplicate paragraphs / paragraphs
  double max_dup_line_char_frac = 0.2;   // bytes in duplicate lines / text bytes
  double max_dup_para_char_frac = 0.2;   // bytes in duplicate paragraphs / text bytes
  double max_top_2gram = 0.20;           // char share of the most frequent 2-gram
  double max_top_3gram = 0.18;
  double max_top_4gram = 0.16;
  // Share of bytes covered by duplicated n-grams, n = 5..10 (Gopher's
  // 0.15, 0.14, 0.13, 0.12, 0.11, 0.10). Index 0 is n = 5.
  double max_dup_ngram[6] = {0.15, 0.14, 0.13, 0.12, 0.11, 0.10};
};

struct C4Params {
  int min_words_per_line = 5;     // lines with fewer words are dropped
  int min_sentences = 3;          // pages with fewer sentences (after line filtering) are dropped
  bool terminal_punct = true;     // drop lines not ending in . ! ? " (or ’ ” ')
  bool drop_javascript = true;    // drop lines containing "javascript"
  bool drop_policy = true;        // drop lines with "terms of use", "privacy policy", "cookie policy", "uses cookies", "use of cookies", "use cookies"
  bool drop_lorem_ipsum = true;   // drop pages containing "lorem ipsum"
  bool drop_curly_bracket = true; // drop pages containing '{'
};

// The outcome of one filter on one document. `rule` is a static string naming
// the rule that removed it ("gopher_quality.min_words", ...; empty when kept),
// `value` what the document measured for that rule and `threshold` the limit.
struct Verdict {
  bool keep = true;
  std::string_view rule;
  double value = 0;
  double threshold = 0;
};

Verdict gopher_quality(std::string_view text, const GopherQualityParams& p);
Verdict gopher_repetition(std::string_view text, const GopherRepetitionParams& p);

// C4: removes the lines the line rules reject from `text` (in place; the
// remaining lines keep their order, joined by '\n'), then applies the page
// rules. *lines_removed, if given, is set to the number of lines dropped.
// A page left with no line is removed with rule "c4.empty".
Verdict c4_filter(std::string& text, const C4Params& p, size_t* lines_removed = nullptr);

}  // namespace crucible::data
