#include "data/text_clean.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace crucible::data {
namespace {

const CleanOptions kNfcOnly{.nfc = true, .whitespace = false};
const CleanOptions kWhitespaceOnly{.nfc = false, .whitespace = true};

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  size_t pos = 0;
  while ((pos = s.find(from, pos)) != std::string::npos) {
    s.replace(pos, from.size(), to);
    pos += to.size();
  }
  return s;
}

// The whitespace rules written out step by step as the header lists them: the oracle
// for the one-pass implementation.
std::string naive_whitespace(std::string s) {
  s = replace_all(s, "\r\n", "\n");
  s = replace_all(s, "\r", "\n");
  for (const char* sp :
       {"\u00A0", "\u1680", "\u2000", "\u2001", "\u2002", "\u2003", "\u2004", "\u2005", "\u2006",
        "\u2007", "\u2008", "\u2009", "\u200A", "\u202F", "\u205F", "\u3000"})
    s = replace_all(s, sp, " ");
  s = replace_all(s, "\u200B", "");
  s = replace_all(s, "\uFEFF", "");
  std::string t;
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\t' && c != '\n') || u == 0x7F) continue;
    t += c;
  }
  // Trailing spaces and tabs of every line.
  std::string u;
  size_t start = 0;
  for (;;) {
    size_t nl = t.find('\n', start);
    std::string line = t.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    while (!line.empty() && (line.back() == ' ' || line.back() == '\t')) line.pop_back();
    u += line;
    if (nl == std::string::npos) break;
    u += '\n';
    start = nl + 1;
  }
  while (u.find("\n\n\n") != std::string::npos) u = replace_all(u, "\n\n\n", "\n\n");
  const char* ws = " \t\n";
  const size_t b = u.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  return u.substr(b, u.find_last_not_of(ws) - b + 1);
}

TEST(TextClean, NfcComposesCombiningMarks) {
  EXPECT_EQ(clean_text("e\u0301", kNfcOnly), "\u00e9");
  EXPECT_EQ(clean_text("caf"
                       "e\u0301 au lait",
                       kNfcOnly),
            "caf\u00e9 au lait");
  // A + ring above, and the Angstrom sign (a canonical singleton) both become U+00C5.
  EXPECT_EQ(clean_text("A\u030A \u212B", kNfcOnly), "\u00C5 \u00C5");
  // Canonical reordering: dot below (ccc 220) before dot above (ccc 230), then compose.
  EXPECT_EQ(clean_text("q\u0307\u0323", kNfcOnly), "q\u0323\u0307");
}

TEST(TextClean, NfcComposesHangulJamo) {
  // U+1100 (choseong kiyeok) + U+1161 (jungseong a) = U+AC00; + U+11A8 (jongseong
  // kiyeok) = U+AC01.
  EXPECT_EQ(clean_text("\u1100\u1161", kNfcOnly), "\uAC00");
  EXPECT_EQ(clean_text("\u1100\u1161\u11A8", kNfcOnly), "\uAC01");
  EXPECT_EQ(clean_text("\u1112\u1161\u11AB\u1100\u1173\u11AF", kNfcOnly), "\uD55C\uAE00");
}

TEST(TextClean, AlreadyNfcAndAsciiUnchanged) {
  const std::string nfc = "na\u00efve r\u00e9sum\u00e9 \uD55C\uAE00 \u65E5\u672C\u8A9E \U0001F600";
  EXPECT_EQ(clean_text(nfc), nfc);
  std::string ascii;
  for (int c = 0x21; c < 0x7F; ++c) ascii += static_cast<char>(c);
  ascii += " line one\n\tindented\nlast";
  EXPECT_EQ(clean_text(ascii), ascii);
  EXPECT_EQ(clean_text(ascii, kNfcOnly), ascii);
  // NFC alone keeps every byte of text with control characters and odd whitespace.
  const std::string raw = "  a\r\nb\x01 \t\n\n\n\nc  ";
  EXPECT_EQ(clean_text(raw, kNfcOnly), raw);
}

TEST(TextClean, NfcOffKeepsDecomposed) {
  EXPECT_EQ(clean_text("e\u0301", kWhitespaceOnly), "e\u0301");
}

TEST(TextClean, NfcMapsSingletonSpacesWhenWhitespaceOff) {
  // U+2000 canonically decomposes to U+2002: NFC alone changes it, the whitespace
  // rules make both a plain space.
  EXPECT_EQ(clean_text("a\u2000b", kNfcOnly), "a\u2002b");
  EXPECT_EQ(clean_text("a\u2000b"), "a b");
}

TEST(TextClean, LineEndings) {
  EXPECT_EQ(clean_text("a\r\nb\rc\nd"), "a\nb\nc\nd");
  EXPECT_EQ(clean_text("a\r\r\nb"), "a\n\nb");  // lone '\r' then "\r\n": two newlines
  EXPECT_EQ(clean_text("a\n\r\n\r\n\rb"), "a\n\nb");
}

TEST(TextClean, UnicodeSpacesBecomeAsciiSpace) {
  for (const char* sp :
       {"\u00A0", "\u1680", "\u2000", "\u2001", "\u2002", "\u2003", "\u2004", "\u2005", "\u2006",
        "\u2007", "\u2008", "\u2009", "\u200A", "\u202F", "\u205F", "\u3000"}) {
    EXPECT_EQ(clean_text(std::string("a") + sp + "b"), "a b") << sp;
    // As trailing or leading whitespace they go away like ASCII spaces.
    EXPECT_EQ(clean_text(std::string(sp) + "a" + sp + "\nb" + sp), "a\nb") << sp;
  }
  // Characters near them that are not spaces stay.
  EXPECT_EQ(clean_text("a\u2010b\u2030c\u3001d"), "a\u2010b\u2030c\u3001d");
}

TEST(TextClean, ZeroWidthAndControlsRemoved) {
  EXPECT_EQ(clean_text("\uFEFFhello\u200Bworld"), "helloworld");
  EXPECT_EQ(clean_text("a\x01"
                       "b\x07"
                       "c\x1B"
                       "d\x7F"
                       "e\x0B"
                       "f\x0C"
                       "g"),
            "abcdefg");
  EXPECT_EQ(clean_text(std::string("a\0b", 3)), "ab");
  EXPECT_EQ(clean_text("a\tb"), "a\tb");  // tab is kept inside a line
  // Removing a zero-width space between a letter and a combining mark still yields NFC.
  EXPECT_EQ(clean_text("e\u200B\u0301"), "\u00e9");
  EXPECT_EQ(clean_text("e\x01\u0301"), "\u00e9");
}

TEST(TextClean, TrailingBlanksOfLinesRemoved) {
  EXPECT_EQ(clean_text("a  \t\nb\t \nc"), "a\nb\nc");
  EXPECT_EQ(clean_text("a \u00A0\u3000\nb"), "a\nb");
}

TEST(TextClean, EmptyLinesCollapse) {
  EXPECT_EQ(clean_text("a\n\nb"), "a\n\nb");
  EXPECT_EQ(clean_text("a\n\n\n\n\nb"), "a\n\nb");
  // Lines holding only whitespace are empty lines once their blanks are gone.
  EXPECT_EQ(clean_text("a\n  \n\t\n \u00A0\nb"), "a\n\nb");
  EXPECT_EQ(clean_text("a\n \nb"), "a\n\nb");
}

TEST(TextClean, DocumentTrimmedIndentationKept) {
  EXPECT_EQ(clean_text("\n\n  \t a\n b\n\n\n    c  \n\n \n"), "a\n b\n\n    c");
  EXPECT_EQ(clean_text("poem:\n    indented line\n\tтаб"), "poem:\n    indented line\n\tтаб");
  EXPECT_EQ(clean_text(" \n\t\r\n\u00A0\u200B"), "");
  EXPECT_EQ(clean_text(""), "");
}

TEST(TextClean, WhitespaceOffKeepsWhitespace) {
  const CleanOptions off{.nfc = false, .whitespace = false};
  const std::string raw = " a\r\n\u00A0\u200B\n\n\n\nb \x01";
  EXPECT_EQ(clean_text(raw, off), raw);
}

// Random documents from pieces that exercise every rule and NFC together.
std::string random_doc(std::mt19937& rng) {
  static const std::vector<std::string> kPieces = {
      "a",      "word",   "E",      "\u00e9", "e",      "\u0301",    "\u0323", "\u0307",
      "\u1100", "\u1161", "\u11A8", "\uAC00", "\u212B", "A",         "\u030A", "\u65E5",
      " ",      " ",      "  ",     "\t",     "\n",     "\n",        "\n\n\n", "\r",
      "\r\n",   "\u00A0", "\u2000", "\u2001", "\u3000", "\u202F",    "\u200B", "\uFEFF",
      "\x01",   "\x7F",   "\x0C",   ".",      ",",      "\U0001F600"};
  std::uniform_int_distribution<size_t> pick(0, kPieces.size() - 1);
  std::uniform_int_distribution<int> len(0, 40);
  std::string s;
  for (int i = len(rng); i > 0; --i) s += kPieces[pick(rng)];
  return s;
}

TEST(TextClean, WhitespaceMatchesStepByStepReference) {
  std::mt19937 rng(1234);
  for (int t = 0; t < 3000; ++t) {
    const std::string doc = random_doc(rng);
    ASSERT_EQ(clean_text(doc, kWhitespaceOnly), naive_whitespace(doc)) << t;
  }
}

TEST(TextClean, Idempotent) {
  std::mt19937 rng(99);
  for (int t = 0; t < 3000; ++t) {
    const std::string doc = random_doc(rng);
    const std::string once = clean_text(doc);
    ASSERT_EQ(clean_text(once), once) << t;
    // And the result satisfies the whitespace rules by itself.
    ASSERT_EQ(naive_whitespace(once), once) << t;
  }
}

}  // namespace
}  // namespace crucible::data
