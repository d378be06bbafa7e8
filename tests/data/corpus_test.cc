#include "data/corpus.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace crucible::data {
namespace {

namespace fs = std::filesystem;

const std::string kFffd = "\xEF\xBF\xBD";  // U+FFFD

class Corpus : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::path(::testing::TempDir()) /
           ("crucible_corpus_" + std::string(info->name()) + "_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& rel, const std::string& content) {
    fs::path p = dir_ / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << content;
    return p.string();
  }

  fs::path dir_;
};

TEST_F(Corpus, FortunesEntriesSeparatorsAndEmptyEntries) {
  // A leading `%`, two adjacent `%`, a whitespace-only entry, lines that merely contain
  // a `%`, an inner blank line, and a last entry without a closing `%`.
  std::string file = write("fort",
                           "%\n"
                           "first line\n  second, indented\n"
                           "%\n"
                           "%\n"
                           "   \n\t\n"
                           "%\n"
                           "100% sure\n%%\n %\n"
                           "%\n"
                           "stanza one\n\nstanza two\n\n\n"  // trailing blank lines dropped
                           "%\n"
                           "last entry\n");
  CorpusStats stats;
  auto docs = read_corpus({file}, CorpusFormat::kFortunes, &stats);
  ASSERT_TRUE(docs.is_ok()) << docs.status().message();
  std::vector<std::string> want = {"first line\n  second, indented", "100% sure\n%%\n %",
                                   "stanza one\n\nstanza two", "last entry"};
  EXPECT_EQ(*docs, want);
  EXPECT_EQ(stats.files, 1u);
  EXPECT_EQ(stats.documents, 4u);
  EXPECT_EQ(stats.skipped_empty, 3u);  // before the first `%`, between `%%`, whitespace
  size_t bytes = 0;
  for (const auto& d : want) bytes += d.size();
  EXPECT_EQ(stats.bytes, bytes);
  EXPECT_EQ(stats.invalid_utf8, 0u);
}

TEST_F(Corpus, FortunesFileEndingInSeparatorHasNoExtraEntry) {
  std::string file = write("fort", "one\n%\ntwo\r\n%\r\n");  // also: Windows line endings
  CorpusStats stats;
  auto docs = read_corpus({file}, CorpusFormat::kFortunes, &stats);
  ASSERT_TRUE(docs.is_ok()) << docs.status().message();
  EXPECT_EQ(*docs, (std::vector<std::string>{"one", "two"}));
  EXPECT_EQ(stats.skipped_empty, 0u);
}

TEST_F(Corpus, DirectoryWalkIsSortedAndSkipsDatSymlinksAndHidden) {
  write("b_fort", "b1\n%\nb2\n%\n");
  write("a_fort", "a1\n%\na2\n%\n");
  write("a_fort.dat", std::string(3, '\0') + "\x02\xff\xfe\n%\ndat entry\n");
  fs::create_symlink("a_fort", dir_ / "a_fort.u8");
  write(".hidden", "hidden\n%\n");
  write(".git/objects/x", "in hidden dir\n%\n");
  write("sub/c_fort", "c1\n%\n");
  fs::create_directory_symlink(dir_ / "sub", dir_ / "sub_link");
  for (CorpusFormat format : {CorpusFormat::kFortunes, CorpusFormat::kAuto}) {
    CorpusStats stats;
    auto docs = read_corpus({dir_.string()}, format, &stats);
    ASSERT_TRUE(docs.is_ok()) << docs.status().message();
    EXPECT_EQ(*docs, (std::vector<std::string>{"a1", "a2", "b1", "b2", "c1"}));
    EXPECT_EQ(stats.files, 3u);
    EXPECT_EQ(stats.documents, 5u);
  }
}

TEST_F(Corpus, TextIsOneDocumentPerFileAndSkipsEmptyFiles) {
  write("1.txt", "  hello\n\tworld  \n");
  write("2.txt", "");
  write("3.txt", " \n \n");
  write("4.txt", "50% of the time\n");  // contains % but no separator line
  CorpusStats stats;
  auto docs = read_corpus({dir_.string()}, CorpusFormat::kText, &stats);
  ASSERT_TRUE(docs.is_ok()) << docs.status().message();
  EXPECT_EQ(*docs, (std::vector<std::string>{"  hello\n\tworld  \n", "50% of the time\n"}));
  EXPECT_EQ(stats.files, 4u);
  EXPECT_EQ(stats.skipped_empty, 2u);
}

TEST_F(Corpus, JsonlReadsTheTextField) {
  std::string file = write("d.jsonl",
                           "{\"text\": \"caf\\u00e9\\nnext line\", \"id\": 7}\n"
                           "\n"
                           "   \n"
                           "{\"meta\": {\"x\": 1}, \"text\": \"second\"}\r\n"
                           "{\"text\": \"  \"}\n"
                           "{\"text\": \"no newline at end\"}");
  CorpusStats stats;
  auto docs = read_corpus({file}, CorpusFormat::kJsonl, &stats);
  ASSERT_TRUE(docs.is_ok()) << docs.status().message();
  EXPECT_EQ(*docs,
            (std::vector<std::string>{"caf\xC3\xA9\nnext line", "second", "no newline at end"}));
  EXPECT_EQ(stats.skipped_empty, 1u);
}

TEST_F(Corpus, JsonlBadLineNamesFileAndLine) {
  struct Case {
    std::string content;
    std::string where;
  };
  Case cases[] = {
      {"{\"text\": \"ok\"}\n\n{\"text\": \"unterminated}\n", ":3: not valid JSON"},
      {"{\"text\": \"ok\"}\n{\"body\": \"no text field\"}\n", ":2: expected a JSON object"},
      {"{\"text\": 42}\n", ":1: expected a JSON object"},
      {"[\"text\"]\n", ":1: expected a JSON object"},
  };
  for (const auto& c : cases) {
    std::string file = write("bad.jsonl", c.content);
    auto docs = read_corpus({file}, CorpusFormat::kJsonl);
    ASSERT_FALSE(docs.is_ok()) << c.content;
    EXPECT_EQ(docs.status().code(), Code::kInvalidArgument);
    EXPECT_EQ(docs.status().message().rfind("[data] " + file + c.where, 0), 0u)
        << docs.status().message();
  }
}

TEST_F(Corpus, AutoDetectsTheFormatPerFile) {
  write("a.jsonl", "{\"text\": \"from jsonl\"}\n");
  write("b_fortunes", "f1\n%\nf2\n");
  write("c.txt", "plain text, 100%\n%%\n");
  write("d.JSON", "{\"text\": \"upper-case extension\"}\n");
  auto docs = read_corpus({dir_.string()}, CorpusFormat::kAuto);
  ASSERT_TRUE(docs.is_ok()) << docs.status().message();
  EXPECT_EQ(*docs, (std::vector<std::string>{"from jsonl", "f1", "f2", "plain text, 100%\n%%\n",
                                             "upper-case extension"}));
}

TEST_F(Corpus, ExplicitPathsKeepTheirOrder) {
  std::string b = write("b.txt", "bee");
  std::string a = write("a.txt", "ay");
  auto docs = read_corpus({b, a}, CorpusFormat::kText);
  ASSERT_TRUE(docs.is_ok()) << docs.status().message();
  EXPECT_EQ(*docs, (std::vector<std::string>{"bee", "ay"}));
}

TEST(Utf8, SanitizeRepairsEachMalformedSequence) {
  struct Case {
    std::string in, out;
    size_t repaired;
  };
  const std::string& R = kFffd;
  Case cases[] = {
      {"plain ascii", "plain ascii", 0},
      {"caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80", "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80", 0},
      {R, R, 0},                                       // U+FFFD itself is valid
      {std::string("a\x80") + "b", "a" + R + "b", 1},  // stray continuation byte
      {"\xFF", R, 1},                                  // never a UTF-8 byte
      {"\xC0\xAF", R + R, 2},                          // overlong '/': C0 is never a lead byte
      {"\xE0\x80\xAF", R + R + R, 3},                  // overlong 3-byte form
      {"\xED\xA0\x80", R + R + R, 3},                  // surrogate U+D800
      {"\xF4\x90\x80\x80", R + R + R + R, 4},          // U+110000, beyond Unicode
      {"\xF5\x80", R + R, 2},                          // lead byte past U+10FFFF
      {"x\xE2\x82", "x" + R, 1},                       // sequence truncated by the end
      {"\xE2\x82x", R + "x", 1},                       // truncated by an ASCII byte
      {std::string("\xF0\x9F\x98") + "A\xF0\x9F\x98\x80", R + "A\xF0\x9F\x98\x80", 1},
      {"\xC3\xC3\xA9", R + "\xC3\xA9", 1},  // a lead byte interrupts another
  };
  for (const auto& c : cases) {
    size_t repaired = 99;
    EXPECT_EQ(sanitize_utf8(c.in, &repaired), c.out) << testing::PrintToString(c.in);
    EXPECT_EQ(repaired, c.repaired) << testing::PrintToString(c.in);
  }
  EXPECT_EQ(sanitize_utf8(std::string("a\0b", 3)), std::string("a\0b", 3));
}

TEST_F(Corpus, DocumentsAreSanitizedAndRepairsCounted) {
  write("f", "good\n%\nbad \xFF byte and \xED\xA0\x80 surrogate\n%\n");
  write("t.jsonl", "{\"text\": \"json \xC0 bad\"}\n");
  CorpusStats stats;
  auto docs = read_corpus({dir_.string()}, CorpusFormat::kAuto, &stats);
  ASSERT_TRUE(docs.is_ok()) << docs.status().message();
  EXPECT_EQ(*docs, (std::vector<std::string>{
                       "good", "bad " + kFffd + " byte and " + kFffd + kFffd + kFffd + " surrogate",
                       "json " + kFffd + " bad"}));
  EXPECT_EQ(stats.invalid_utf8, 5u);
}

TEST_F(Corpus, MissingPathIsNotFound) {
  write("ok.txt", "text");
  std::string missing = (dir_ / "nope").string();
  auto docs = read_corpus({(dir_ / "ok.txt").string(), missing}, CorpusFormat::kAuto);
  ASSERT_FALSE(docs.is_ok());
  EXPECT_EQ(docs.status().code(), Code::kNotFound);
  EXPECT_EQ(docs.status().message(), "[data] corpus path " + missing + " does not exist");
}

TEST_F(Corpus, CorpusWithoutDocumentsIsAnError) {
  write("empty.txt", "");
  write("index.dat", "binary\n%\nentry\n");
  write(".hidden", "entry\n");
  auto docs = read_corpus({dir_.string()}, CorpusFormat::kAuto);
  ASSERT_FALSE(docs.is_ok());
  EXPECT_EQ(docs.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(docs.status().message(), "[data] corpus " + dir_.string() +
                                         ": no documents found (1 files read, 1 empty "
                                         "documents skipped)");
  fs::create_directory(dir_ / "nothing");
  auto none = read_corpus({(dir_ / "nothing").string()}, CorpusFormat::kFortunes);
  ASSERT_FALSE(none.is_ok());
  EXPECT_NE(none.status().message().find("no documents found"), std::string::npos);
}

TEST(CorpusFormatName, ParsesKnownNamesAndNamesTheBadOne) {
  EXPECT_EQ(*parse_corpus_format("auto"), CorpusFormat::kAuto);
  EXPECT_EQ(*parse_corpus_format("fortunes"), CorpusFormat::kFortunes);
  EXPECT_EQ(*parse_corpus_format("text"), CorpusFormat::kText);
  EXPECT_EQ(*parse_corpus_format("jsonl"), CorpusFormat::kJsonl);
  auto bad = parse_corpus_format("parquet");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("\"parquet\""), std::string::npos);
}

// Debian's fortunes package, the embedded default corpus: each *.u8 symlink and *.dat
// index is skipped, so every entry is read exactly once.
TEST(CorpusFortunesPackage, ReadsEachEntryOnce) {
  const fs::path dir = "/usr/share/games/fortunes";
  if (!fs::is_directory(dir)) GTEST_SKIP() << dir << " is not installed";
  size_t text_files = 0;
  for (const auto& e : fs::directory_iterator(dir))
    if (!e.is_symlink() && e.is_regular_file() && e.path().extension() != ".dat") ++text_files;
  CorpusStats stats;
  auto docs = read_corpus({dir.string()}, CorpusFormat::kFortunes, &stats);
  ASSERT_TRUE(docs.is_ok()) << docs.status().message();
  EXPECT_EQ(stats.files, text_files);
  EXPECT_GT(stats.documents, 1000u);
  for (const auto& d : *docs) {
    ASSERT_FALSE(d.empty());
    ASSERT_NE(d.back(), '\n');
    ASSERT_EQ(d.find("\n%\n"), std::string::npos);
  }
}

}  // namespace
}  // namespace crucible::data
