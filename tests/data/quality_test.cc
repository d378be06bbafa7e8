#include "data/quality.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "support/verdict_checks.h"

namespace crucible::data {
namespace {

// ---- document builders ----

const std::vector<std::string> kVocab = {"the", "river", "flows",  "past", "old",   "mill",
                                         "and", "into",  "valley", "of",   "green", "hills"};

std::vector<std::string> prose_words(int n) {
  std::vector<std::string> w;
  for (int i = 0; i < n; ++i) w.push_back(kVocab[i % kVocab.size()]);
  return w;
}

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string s;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) s += sep;
    s += parts[i];
  }
  return s;
}

std::string prose(int n) { return join(prose_words(n), " "); }


const char* kParagraph =
    "The old mill stood at the edge of the village for more than two hundred years. Every "
    "spring, when the snow melted in the hills, the river rose and turned the great wheel "
    "faster than anyone could remember. Children from the nearby farms would gather on the "
    "bridge to watch the water rush beneath them, and the miller, a patient man with flour "
    "in his beard, often let them climb the wooden stairs to see the stones at work. Today "
    "the building is a small museum, but visitors still say that on quiet evenings they can "
    "hear the wheel turning.";

// ---- Gopher quality ----

TEST(GopherQuality, RealisticParagraphPassesBothFilters) {
  expect_kept(gopher_quality(kParagraph, {}));
  expect_kept(gopher_repetition(kParagraph, {}));
}

TEST(GopherQuality, MinWords) {
  expect_kept(gopher_quality(prose(50), {}));
  const Verdict v = gopher_quality(prose(49), {});
  expect_removed(v, "gopher_quality.min_words");
  EXPECT_EQ(v.value, 49);
  EXPECT_EQ(v.threshold, 50);
  // Symbol words do not count.
  expect_removed(gopher_quality(prose(49) + " - ... -- !", {}), "gopher_quality.min_words");
  GopherQualityParams off;
  off.min_words = 0;
  expect_kept(gopher_quality(prose(10), off));
}

TEST(GopherQuality, MaxWords) {
  GopherQualityParams p;
  p.max_words = 60;
  expect_kept(gopher_quality(prose(60), p));
  const Verdict v = gopher_quality(prose(61), p);
  expect_removed(v, "gopher_quality.max_words");
  EXPECT_EQ(v.value, 61);
  p.max_words = -1;
  expect_kept(gopher_quality(prose(5000), p));
}

TEST(GopherQuality, MinMeanWordLength) {
  std::vector<std::string> w(100, "the");  // mean exactly 3
  expect_kept(gopher_quality(join(w, " "), {}));
  w[50] = "to";  // mean 2.99
  const Verdict v = gopher_quality(join(w, " "), {});
  expect_removed(v, "gopher_quality.mean_word_length");
  EXPECT_DOUBLE_EQ(v.value, 2.99);
  EXPECT_EQ(v.threshold, 3);
  GopherQualityParams off;
  off.min_mean_word_length = 0;
  expect_kept(gopher_quality(join(w, " "), off));
}

TEST(GopherQuality, MaxMeanWordLength) {
  // 2 * 3 + 24 + 97 * 10 = 1000 bytes over 100 words: mean exactly 10.
  std::vector<std::string> w(100, "abcdefghij");
  w[0] = w[1] = "the";
  w[2] = std::string(24, 'x');
  expect_kept(gopher_quality(join(w, " "), {}));
  w[2] += 'x';  // mean 10.01
  const Verdict v = gopher_quality(join(w, " "), {});
  expect_removed(v, "gopher_quality.mean_word_length");
  EXPECT_DOUBLE_EQ(v.value, 10.01);
  EXPECT_EQ(v.threshold, 10);
  GopherQualityParams off;
  off.max_mean_word_length = -1;
  expect_kept(gopher_quality(join(w, " "), off));
}

TEST(GopherQuality, HashRatio) {
  std::vector<std::string> w = prose_words(100);
  for (int i = 1; i <= 10; ++i) w[i] = "#" + w[i];
  expect_kept(gopher_quality(join(w, " "), {}));  // 10 / 100 = 0.1 exactly
  w[11] = "#" + w[11];
  const Verdict v = gopher_quality(join(w, " "), {});
  expect_removed(v, "gopher_quality.hash_ratio");
  EXPECT_DOUBLE_EQ(v.value, 0.11);
  // Every '#' counts, also inside a word and as a word of its own ('#' words are
  // words of the denominator).
  std::vector<std::string> x = prose_words(100);
  x[5] = "a##b";
  x[6] = "#";
  for (int i = 7; i < 15; ++i) x[i] = "#" + x[i];  // 2 + 1 + 8 = 11 hashes
  expect_removed(gopher_quality(join(x, " "), {}), "gopher_quality.hash_ratio");
  GopherQualityParams off;
  off.max_hash_ratio = -1;
  expect_kept(gopher_quality(join(w, " "), off));
}

TEST(GopherQuality, EllipsisRatio) {
  std::vector<std::string> w = prose_words(100);
  for (int i = 1; i <= 5; ++i) w[i] += "...";
  for (int i = 6; i <= 10; ++i) w[i] += "\u2026";
  expect_kept(gopher_quality(join(w, " "), {}));  // 10 / 100
  w[11] += "...";
  const Verdict v = gopher_quality(join(w, " "), {});
  expect_removed(v, "gopher_quality.ellipsis_ratio");
  EXPECT_DOUBLE_EQ(v.value, 0.11);
  // Non-overlapping count as Python's str.count: "...." holds one, "......" two.
  std::vector<std::string> x = prose_words(100);
  for (int i = 1; i <= 9; ++i) x[i] += "....";  // 9
  x[20] += "......";                            // 11
  expect_removed(gopher_quality(join(x, " "), {}), "gopher_quality.ellipsis_ratio");
  x[20] = "..";  // 9 + 0: kept
  expect_kept(gopher_quality(join(x, " "), {}));
  GopherQualityParams off;
  off.max_ellipsis_ratio = -1;
  expect_kept(gopher_quality(join(w, " "), off));
}

// Ten lines of prose (60 words), each line optionally prefixed.
std::string lines_doc(const std::vector<std::string>& prefix,
                      const std::vector<std::string>& suffix) {
  std::vector<std::string> lines;
  for (size_t i = 0; i < 10; ++i) {
    std::string line = prose(6);
    if (i < prefix.size()) line = prefix[i] + line;
    if (i < suffix.size()) line += suffix[i];
    lines.push_back(line);
  }
  return join(lines, "\n");
}

TEST(GopherQuality, BulletLines) {
  const std::vector<std::string> bullets = {"\u2022 ", "\u2023 ",    "\u2043 ", "\u25E6 ",
                                            "\u25AA ", "\u25AB ",    "\u2013 ", "- ",
                                            "*",       "  \t\u00B7 "};
  std::vector<std::string> nine(bullets.begin(), bullets.begin() + 9);
  expect_kept(gopher_quality(lines_doc(nine, {}), {}));  // 9 / 10 = 0.9
  const Verdict v = gopher_quality(lines_doc(bullets, {}), {});
  expect_removed(v, "gopher_quality.bullet_lines");
  EXPECT_EQ(v.value, 1.0);
  // Each bullet on its own is recognised.
  for (const std::string& b : bullets)
    expect_removed(gopher_quality(lines_doc(std::vector<std::string>(10, b), {}), {}),
                   "gopher_quality.bullet_lines");
  // Not bullets: '+', a dash inside the line, an em dash.
  expect_kept(gopher_quality(lines_doc(std::vector<std::string>(10, "+ "), {}), {}));
  expect_kept(gopher_quality(lines_doc(std::vector<std::string>(10, "a - "), {}), {}));
  expect_kept(gopher_quality(lines_doc(std::vector<std::string>(10, "\u2014 "), {}), {}));
  // Empty lines are not lines: 9 bullets and blank lines in between still make 9 / 10.
  std::string spaced = lines_doc(nine, {});
  size_t pos = 0;
  while ((pos = spaced.find('\n', pos)) != std::string::npos) {
    spaced.insert(pos, "\n\n");
    pos += 3;
  }
  expect_kept(gopher_quality(spaced, {}));
  GopherQualityParams off;
  off.max_bullet_lines = -1;
  expect_kept(gopher_quality(lines_doc(bullets, {}), off));
}

TEST(GopherQuality, EllipsisLines) {
  expect_kept(gopher_quality(lines_doc({}, {" ...", "...", "\u2026  "}), {}));  // 3 / 10
  const Verdict v = gopher_quality(lines_doc({}, {" ...", "...", "\u2026  ", "....\t"}), {});
  expect_removed(v, "gopher_quality.ellipsis_lines");
  EXPECT_DOUBLE_EQ(v.value, 0.4);
  // Ellipses not at the end of the line do not count.
  expect_kept(gopher_quality(lines_doc({"... ", "... ", "... ", "\u2026 "}, {}), {}));
  GopherQualityParams off;
  off.max_ellipsis_lines = -1;
  expect_kept(gopher_quality(lines_doc({}, {" ...", "...", "\u2026  ", "....\t"}), off));
}

TEST(GopherQuality, AlphaWords) {
  std::vector<std::string> w = prose_words(100);
  for (int i = 30; i < 50; ++i) w[i] = "1234";  // 80 / 100 with a letter
  expect_kept(gopher_quality(join(w, " "), {}));
  w[50] = "5678";
  const Verdict v = gopher_quality(join(w, " "), {});
  expect_removed(v, "gopher_quality.alpha_words");
  EXPECT_DOUBLE_EQ(v.value, 0.79);
  // Symbol words count in the denominator; non-ASCII words have a letter.
  std::vector<std::string> x = prose_words(100);
  for (int i = 30; i < 50; ++i) x[i] = "\u65E5\u672C";
  x[50] = "--";
  expect_kept(gopher_quality(join(x, " "), {}));
  for (int i = 51; i < 72; ++i) x[i] = "--";  // 22 symbol words of 100
  expect_removed(gopher_quality(join(x, " "), {}), "gopher_quality.alpha_words");
  GopherQualityParams off;
  off.min_alpha_words = 0;
  expect_kept(gopher_quality(join(w, " "), off));
}

TEST(GopherQuality, StopWords) {
  const std::vector<std::string> plain = {"river", "flows",  "past",  "old",   "mill",
                                          "into",  "valley", "green", "hills", "quiet"};
  std::vector<std::string> w;
  for (int i = 0; i < 60; ++i) w.push_back(plain[i % plain.size()]);
  w[3] = "The";
  w[7] = "of,";
  expect_kept(gopher_quality(join(w, " "), {}));
  w[7] = "Theory";  // not a stop word
  const Verdict v = gopher_quality(join(w, " "), {});
  expect_removed(v, "gopher_quality.stop_words");
  EXPECT_EQ(v.value, 1);
  EXPECT_EQ(v.threshold, 2);
  // Punctuation, curly quotes and case are stripped; inner punctuation is not.
  for (const char* sw : {"(with)", "\u201CHave", "THAT\u2019", "and...", "BE!", "\"to\""}) {
    w[7] = sw;
    expect_kept(gopher_quality(join(w, " "), {}));
  }
  for (const char* not_sw : {"th-e", "tothe", "an", "be1", "withal"}) {
    w[7] = not_sw;
    expect_removed(gopher_quality(join(w, " "), {}), "gopher_quality.stop_words");
  }
  GopherQualityParams off;
  off.min_stop_words = 0;
  expect_kept(gopher_quality(join(w, " "), off));
}

TEST(GopherQuality, FirstFailingRuleInOrder) {
  // Too short and full of hashes: min_words comes first.
  expect_removed(gopher_quality("# # # word", {}), "gopher_quality.min_words");
  // Long enough, bad mean length and hashes: mean length before hash ratio.
  std::vector<std::string> w(60, "a");
  for (int i = 0; i < 30; ++i) w[i] = "#a";
  expect_removed(gopher_quality(join(w, " "), {}), "gopher_quality.mean_word_length");
  // Hash ratio before ellipsis ratio before bullet lines.
  std::vector<std::string> lines(10, "- #the #river #flows past... old... mill... and");
  expect_removed(gopher_quality(join(lines, "\n"), {}), "gopher_quality.hash_ratio");
  GopherQualityParams p;
  p.max_hash_ratio = -1;
  expect_removed(gopher_quality(join(lines, "\n"), p), "gopher_quality.ellipsis_ratio");
  p.max_ellipsis_ratio = -1;
  expect_removed(gopher_quality(join(lines, "\n"), p), "gopher_quality.bullet_lines");
}

TEST(GopherQuality, EmptyText) {
  expect_removed(gopher_quality("", {}), "gopher_quality.min_words");
  GopherQualityParams p;
  p.min_words = 0;
  expect_removed(gopher_quality("", p), "gopher_quality.stop_words");
  p.min_stop_words = 0;
  expect_kept(gopher_quality("", p));
}

// ---- Gopher repetition: naive references ----

GopherRepetitionParams all_off() {
  GopherRepetitionParams p;
  p.max_dup_line_frac = p.max_dup_para_frac = -1;
  p.max_dup_line_char_frac = p.max_dup_para_char_frac = -1;
  p.max_top_2gram = p.max_top_3gram = p.max_top_4gram = -1;
  for (double& d : p.max_dup_ngram) d = -1;
  return p;
}

std::vector<std::string> split_ws(const std::string& s) {
  std::vector<std::string> w;
  std::string cur;
  for (char c : s) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      if (!cur.empty()) w.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) w.push_back(cur);
  return w;
}

std::string ngram(const std::vector<std::string>& w, size_t i, int n) {
  std::string s = w[i];
  for (int k = 1; k < n; ++k) s += " " + w[i + k];
  return s;
}

double naive_top_ngram(const std::string& text, int n) {
  const auto w = split_ws(text);
  std::map<std::string, size_t> count;
  for (size_t i = 0; i + n <= w.size(); ++i) ++count[ngram(w, i, n)];
  size_t best_count = 0, best_len = 0;
  for (const auto& [g, c] : count)
    if (c > best_count || (c == best_count && g.size() > best_len)) {
      best_count = c;
      best_len = g.size();
    }
  if (best_count < 2) return 0;
  return static_cast<double>(best_len * best_count) / static_cast<double>(text.size());
}

double naive_dup_ngram(const std::string& text, int n) {
  const auto w = split_ws(text);
  std::set<std::string> seen;
  size_t bytes = 0;
  size_t i = 0;
  while (i + n <= w.size()) {
    const std::string g = ngram(w, i, n);
    if (seen.count(g)) {
      bytes += g.size();
      i += n;
    } else {
      seen.insert(g);
      i += 1;
    }
  }
  return static_cast<double>(bytes) / static_cast<double>(text.size());
}

// The value a rule measures: its threshold set to 0 (all others off) makes any
// positive value fire and report itself.
double measured(const std::string& text, double GopherRepetitionParams::*field) {
  GopherRepetitionParams p = all_off();
  p.*field = 0;
  const Verdict v = gopher_repetition(text, p);
  return v.keep ? 0 : v.value;
}

double measured_dup(const std::string& text, int n) {
  GopherRepetitionParams p = all_off();
  p.max_dup_ngram[n - 5] = 0;
  const Verdict v = gopher_repetition(text, p);
  return v.keep ? 0 : v.value;
}

std::string random_words_doc(std::mt19937& rng) {
  // Small vocabularies repeat everything; larger ones leave most n-grams unique (the
  // pruned path of the implementation).
  static const std::vector<std::string> kWords = {"a", "bb", "ccc", "a", "dd", "e", "\u00e9t\u00e9",
                                                  "f", "g",  "h",   "i", "j",  "k", "l",
                                                  "m", "n",  "o",   "p", "q",  "r", "s",
                                                  "t", "u",  "v",   "w", "x",  "y", "z"};
  const size_t vocab = std::uniform_int_distribution<int>(0, 2)(rng) == 0 ? 3 : rng() % 2 ? 7 : 28;
  std::uniform_int_distribution<size_t> pick(0, vocab - 1);
  std::uniform_int_distribution<int> len(0, 80);
  std::uniform_int_distribution<int> sep(0, 9);
  std::string s;
  for (int i = len(rng); i > 0; --i) {
    s += kWords[pick(rng)];
    const int k = sep(rng);
    s += k < 6 ? " " : k < 7 ? "  " : k < 8 ? "\n" : k < 9 ? "\n\n" : "\t";
  }
  return s;
}

TEST(GopherRepetition, NgramRulesMatchNaiveReference) {
  std::mt19937 rng(7);
  for (int t = 0; t < 1000; ++t) {
    const std::string doc = random_words_doc(rng);
    if (doc.empty()) continue;
    ASSERT_EQ(measured(doc, &GopherRepetitionParams::max_top_2gram), naive_top_ngram(doc, 2)) << t;
    ASSERT_EQ(measured(doc, &GopherRepetitionParams::max_top_3gram), naive_top_ngram(doc, 3)) << t;
    ASSERT_EQ(measured(doc, &GopherRepetitionParams::max_top_4gram), naive_top_ngram(doc, 4)) << t;
    for (int n = 5; n <= 10; ++n) ASSERT_EQ(measured_dup(doc, n), naive_dup_ngram(doc, n)) << t;
  }
}

TEST(GopherRepetition, DupNgramHandComputed) {
  // 10 words, 19 bytes: "a b c d e" recurs at word 5 (9 bytes), the walk then jumps past it.
  EXPECT_DOUBLE_EQ(measured_dup("a b c d e a b c d e", 5), 9.0 / 19.0);
  // A run of one word: 5-grams at 0 new, at 1 repeated (+9, jump to 6), at 6 repeated (+9).
  EXPECT_DOUBLE_EQ(measured_dup("x x x x x x x x x x x", 5), 18.0 / 21.0);
  EXPECT_EQ(measured_dup("a b c d e f g h i j", 5), 0);
}

TEST(GopherRepetition, TopNgramNeedsARepeat) {
  // All 2-grams distinct: never fires, even with threshold 0.
  EXPECT_EQ(measured("one two three four five six", &GopherRepetitionParams::max_top_2gram), 0);
  // "ab cd" twice: 2 * 5 / 17.
  EXPECT_DOUBLE_EQ(measured("ab cd ab cd xy zw", &GopherRepetitionParams::max_top_2gram),
                   10.0 / 17.0);
}

// A threshold equal to the measured value keeps; one just below removes, with the rule's
// name; -1 never fires.
void check_threshold(const std::string& text, double GopherRepetitionParams::*field,
                     std::string_view rule) {
  const double value = measured(text, field);
  ASSERT_GT(value, 0) << rule;
  GopherRepetitionParams p = all_off();
  p.*field = value;
  expect_kept(gopher_repetition(text, p));
  p.*field = std::nextafter(value, 0.0);
  const Verdict v = gopher_repetition(text, p);
  expect_removed(v, rule);
  EXPECT_EQ(v.value, value);
  p.*field = -1;
  expect_kept(gopher_repetition(text, p));
}

std::vector<std::string> distinct_lines(int n) {
  std::vector<std::string> lines;
  for (int i = 0; i < n; ++i) lines.push_back("line number " + std::to_string(i) + " says hello");
  return lines;
}

TEST(GopherRepetition, DupLineFrac) {
  std::vector<std::string> lines = distinct_lines(7);
  lines.push_back(lines[0]);
  lines.push_back(lines[1]);
  lines.push_back(lines[0]);  // 3 duplicates of 10
  GopherRepetitionParams p = all_off();
  p.max_dup_line_frac = 0.3;
  expect_kept(gopher_repetition(join(lines, "\n"), p));
  lines[6] = lines[2];  // 4 of 10
  const Verdict v = gopher_repetition(join(lines, "\n"), p);
  expect_removed(v, "gopher_repetition.dup_line_frac");
  EXPECT_DOUBLE_EQ(v.value, 0.4);
  // Empty lines are not lines (blank runs between them change nothing).
  expect_removed(gopher_repetition(join(lines, "\n\n\n"), p), "gopher_repetition.dup_line_frac");
  p.max_dup_line_frac = -1;
  expect_kept(gopher_repetition(join(lines, "\n"), p));
}

TEST(GopherRepetition, DupParaFrac) {
  std::vector<std::string> paras = distinct_lines(7);
  for (auto& s : paras) s += "\nsecond line";  // paragraphs of two lines
  paras.push_back(paras[0]);
  paras.push_back(paras[1]);
  paras.push_back(paras[0]);
  GopherRepetitionParams p = all_off();
  p.max_dup_para_frac = 0.3;
  expect_kept(gopher_repetition(join(paras, "\n\n"), p));
  paras[6] = paras[2];
  const Verdict v = gopher_repetition(join(paras, "\n\n\n\n"), p);
  expect_removed(v, "gopher_repetition.dup_para_frac");
  EXPECT_DOUBLE_EQ(v.value, 0.4);
  // A single '\n' does not separate paragraphs: one paragraph, no duplicates.
  expect_kept(gopher_repetition(join(paras, "\n"), p));
  p.max_dup_para_frac = -1;
  expect_kept(gopher_repetition(join(paras, "\n\n"), p));
}

TEST(GopherRepetition, DupLineCharFrac) {
  // 100 bytes: "AAAAAAAAAA" twice after its first line: 20 / 100 = 0.2 exactly.
  // Lines: 10 + 10 + 10 + 67 bytes + 3 newlines = 100.
  const std::string a(10, 'A');
  std::string doc = a + "\n" + a + "\n" + a + "\n" + std::string(67, 'z');
  ASSERT_EQ(doc.size(), 100u);
  GopherRepetitionParams p = all_off();
  p.max_dup_line_char_frac = 0.2;
  expect_kept(gopher_repetition(doc, p));
  const std::string b(11, 'B');  // 22 / 100
  doc = b + "\n" + b + "\n" + b + "\n" + std::string(64, 'z');
  ASSERT_EQ(doc.size(), 100u);
  const Verdict v = gopher_repetition(doc, p);
  expect_removed(v, "gopher_repetition.dup_line_char_frac");
  EXPECT_DOUBLE_EQ(v.value, 0.22);
  check_threshold(doc, &GopherRepetitionParams::max_dup_line_char_frac,
                  "gopher_repetition.dup_line_char_frac");
}

TEST(GopherRepetition, DupParaCharFrac) {
  // Paragraphs 10, 10, 10, 64 bytes joined by "\n\n": 94 + 6 = 100 bytes.
  const std::string a(10, 'A');
  std::string doc = a + "\n\n" + a + "\n\n" + a + "\n\n" + std::string(64, 'z');
  ASSERT_EQ(doc.size(), 100u);
  GopherRepetitionParams p = all_off();
  p.max_dup_para_char_frac = 0.2;
  expect_kept(gopher_repetition(doc, p));
  const std::string b(11, 'B');
  doc = b + "\n\n" + b + "\n\n" + b + "\n\n" + std::string(61, 'z');
  ASSERT_EQ(doc.size(), 100u);
  const Verdict v = gopher_repetition(doc, p);
  expect_removed(v, "gopher_repetition.dup_para_char_frac");
  EXPECT_DOUBLE_EQ(v.value, 0.22);
  check_threshold(doc, &GopherRepetitionParams::max_dup_para_char_frac,
                  "gopher_repetition.dup_para_char_frac");
}

TEST(GopherRepetition, TopNgramThresholds) {
  // "of the" 4 times in 100 bytes: 6 * 4 / 100 = 0.24 > 0.20.
  const std::string doc4 =
      "of the aaaa of the bbbb of the cccc of the dddd " + std::string(52, 'x');
  ASSERT_EQ(doc4.size(), 100u);
  GopherRepetitionParams p = all_off();
  p.max_top_2gram = 0.20;
  Verdict v = gopher_repetition(doc4, p);
  expect_removed(v, "gopher_repetition.top_2gram");
  EXPECT_DOUBLE_EQ(v.value, 0.24);
  // "of the" 3 times in 90 bytes: 18 / 90 = 0.2 exactly, kept.
  const std::string doc3 = "of the aaaa of the bbbb of the cccc " + std::string(54, 'x');
  ASSERT_EQ(doc3.size(), 90u);
  expect_kept(gopher_repetition(doc3, p));
  check_threshold(doc4, &GopherRepetitionParams::max_top_2gram, "gopher_repetition.top_2gram");
  check_threshold("of the a x of the a y z", &GopherRepetitionParams::max_top_3gram,
                  "gopher_repetition.top_3gram");
  check_threshold("a b c d a b c d x", &GopherRepetitionParams::max_top_4gram,
                  "gopher_repetition.top_4gram");
}

TEST(GopherRepetition, DupNgramThresholds) {
  static constexpr std::string_view kRule[] = {
      "gopher_repetition.dup_5gram", "gopher_repetition.dup_6gram", "gopher_repetition.dup_7gram",
      "gopher_repetition.dup_8gram", "gopher_repetition.dup_9gram", "gopher_repetition.dup_10gram"};
  const std::string doc = prose(12) + " " + prose(12) + " tail words here";
  for (int n = 5; n <= 10; ++n) {
    const double value = measured_dup(doc, n);
    ASSERT_GT(value, 0);
    ASSERT_EQ(value, naive_dup_ngram(doc, n));
    GopherRepetitionParams p = all_off();
    p.max_dup_ngram[n - 5] = value;
    expect_kept(gopher_repetition(doc, p));
    p.max_dup_ngram[n - 5] = std::nextafter(value, 0.0);
    expect_removed(gopher_repetition(doc, p), kRule[n - 5]);
    p.max_dup_ngram[n - 5] = -1;
    expect_kept(gopher_repetition(doc, p));
  }
}

TEST(GopherRepetition, DefaultsOrderAndRepeatedText) {
  // The same line ten times: the first rule in order (dup_line_frac) reports it.
  std::vector<std::string> lines(10, "the same line of text again");
  expect_removed(gopher_repetition(join(lines, "\n"), {}), "gopher_repetition.dup_line_frac");
  // One long line repeating a phrase: only the n-gram rules can see it.
  std::string rep;
  for (int i = 0; i < 20; ++i) rep += "buy cheap watches online ";
  expect_removed(gopher_repetition(rep, {}), "gopher_repetition.top_2gram");
  expect_kept(gopher_repetition("", {}));
}

}  // namespace
}  // namespace crucible::data
