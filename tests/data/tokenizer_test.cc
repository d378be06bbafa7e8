#include "data/tokenizer.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <xxhash.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/check.h"
#include "support/files.h"

namespace crucible::data {
namespace {

namespace fs = std::filesystem;

constexpr int kVocab = 360;

// A small poem-like corpus: multi-line documents with indentation, tabs, digits and
// blank lines, so that newline, tab and space pieces are learned.
std::vector<std::string> synthetic_corpus() {
  const char* words[] = {"the",  "quiet", "river", "runs",  "under", "a",     "pale",
                         "moon", "and",   "every", "stone", "sings", "of",    "time",
                         "lost", "in",    "old",   "snow",  "we",    "wander"};
  std::mt19937 rng(1234);  // mt19937's output sequence is fixed by the standard
  std::vector<std::string> docs;
  for (int d = 0; d < 300; ++d) {
    std::string doc;
    int lines = 2 + int(rng() % 4);
    for (int l = 0; l < lines; ++l) {
      if (rng() % 4 == 0) doc += rng() % 2 ? "\t" : "    ";
      int n = 3 + int(rng() % 5);
      for (int w = 0; w < n; ++w) {
        if (w) doc += ' ';
        doc += words[rng() % 20];
      }
      doc += rng() % 3 == 0 ? ", " + std::to_string(rng() % 2000) + "." : ".";
      if (l + 1 < lines) doc += rng() % 5 == 0 ? "\n\n" : "\n";
    }
    docs.push_back(doc);
  }
  return docs;
}

std::string read_bytes(const fs::path& p) { return testutil::read_file(p.string()); }

class TokenizerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::path(::testing::TempDir()) /
                        ("crucible_tokenizer_" + std::to_string(getpid())));
    fs::remove_all(*dir_);
    fs::create_directories(*dir_);
    model_ = new std::string((*dir_ / "tok.model").string());
    Status s = Tokenizer::train(synthetic_corpus(), kVocab, *model_, /*num_threads=*/2);
    ASSERT_TRUE(s.is_ok()) << s.message();
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
    delete model_;
  }
  static Tokenizer load() {
    auto t = Tokenizer::load(*model_);
    CRUCIBLE_CHECK(t.is_ok(), "test model loads");
    return std::move(t).value();
  }

  static fs::path* dir_;
  static std::string* model_;
};
fs::path* TokenizerTest::dir_ = nullptr;
std::string* TokenizerTest::model_ = nullptr;

TEST_F(TokenizerTest, VocabularyLayout) {
  Tokenizer tok = load();
  EXPECT_EQ(tok.vocab_size(), kVocab);
  EXPECT_EQ(tok.eos_id(), Tokenizer::kEosId);
  EXPECT_EQ(tok.piece(Tokenizer::kUnkId), "<unk>");
  EXPECT_EQ(tok.piece(Tokenizer::kEosId), "</s>");
  EXPECT_EQ(tok.piece(2), "<0x00>");
  EXPECT_EQ(tok.piece(257), "<0xFF>");
  EXPECT_EQ(tok.decode({Tokenizer::kEosId}), "");
}

TEST_F(TokenizerTest, RoundTripsTrickyText) {
  Tokenizer tok = load();
  const std::vector<std::string> cases = {
      "the quiet river",
      "line one\nline two\n\n\nafter blank lines\n",
      "\n",
      "\t\tindented\twith tabs\t",
      "   leading spaces and trailing   ",
      " ",
      "runs  of   spaces    here",
      "emoji \xF0\x9F\x98\x80\xF0\x9F\x8E\x89 and \xE2\x9D\xA4\xEF\xB8\x8F",
      "replacement \xEF\xBF\xBD char",
      "unseen scripts: \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E \xD0\xBC\xD0\xB8\xD1\x80",
      "SentencePiece's space mark \xE2\x96\x81 itself, \xE2\x96\x81\xE2\x96\x81 twice",
      "\xE2\x96\x81",
      "meta-looking text: </s> <unk> <0x41> <s>",
      "digits 1234567890 and 3.14159",
      "windows\r\nline endings\r\n",
      std::string("nul \0 byte", 10),
  };
  for (const auto& text : cases) {
    std::vector<int32_t> ids = tok.encode(text);
    EXPECT_EQ(tok.decode(ids), text) << testing::PrintToString(text);
    for (int32_t id : ids) {
      ASSERT_GE(id, 0);
      ASSERT_LT(id, kVocab);
      EXPECT_NE(id, Tokenizer::kUnkId) << testing::PrintToString(text);
      EXPECT_NE(id, Tokenizer::kEosId) << testing::PrintToString(text);
    }
  }
  EXPECT_TRUE(tok.encode("").empty());
}

TEST_F(TokenizerTest, NewlineAndSpaceRunsArePiecesAndTrainingTextCompresses) {
  Tokenizer tok = load();
  // Newlines were kept in the training sentences, so '\n' is a vocabulary piece rather
  // than a byte fallback <0x0A>.
  std::vector<int32_t> nl = tok.encode("\n");
  ASSERT_EQ(nl.size(), 1u);
  EXPECT_EQ(tok.piece(nl[0]), "\n");
  // The corpus indents with four spaces: whitespace-only pieces cover such runs.
  EXPECT_LT(tok.encode("    ").size(), 4u);
  size_t bytes = 0, tokens = 0;
  for (const auto& doc : synthetic_corpus()) {
    bytes += doc.size();
    tokens += tok.encode(doc).size();
  }
  EXPECT_LT(tokens * 3, bytes) << "BPE merges should give > 3 bytes per token here";
  // Decoding a slice concatenates: documents split anywhere on token boundaries.
  std::string text = "the river\nruns";
  std::vector<int32_t> ids = tok.encode(text);
  ASSERT_GE(ids.size(), 2u);
  size_t half = ids.size() / 2;
  EXPECT_EQ(tok.decode(ids.data(), half) + tok.decode(ids.data() + half, ids.size() - half), text);
}

TEST_F(TokenizerTest, TrainingIsDeterministicAndFingerprintIsTheFileHash) {
  std::string again = (*dir_ / "again.model").string();
  ASSERT_TRUE(Tokenizer::train(synthetic_corpus(), kVocab, again, 2).is_ok());
  std::string a = read_bytes(*model_), b = read_bytes(again);
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a, b);
  Tokenizer ta = load();
  auto tb = Tokenizer::load(again);
  ASSERT_TRUE(tb.is_ok()) << tb.status().message();
  EXPECT_EQ(ta.fingerprint(), tb->fingerprint());
  EXPECT_EQ(ta.fingerprint(), XXH64(a.data(), a.size(), 0));

  std::string other = (*dir_ / "other.model").string();
  ASSERT_TRUE(Tokenizer::train(synthetic_corpus(), kVocab + 8, other, 2).is_ok());
  auto tc = Tokenizer::load(other);
  ASSERT_TRUE(tc.is_ok()) << tc.status().message();
  EXPECT_EQ(tc->vocab_size(), kVocab + 8);
  EXPECT_NE(tc->fingerprint(), ta.fingerprint());
}

TEST_F(TokenizerTest, TrainingLeavesOnlyTheModelFile) {
  fs::path sub = *dir_ / "clean";
  fs::create_directories(sub);
  ASSERT_TRUE(Tokenizer::train(synthetic_corpus(), kVocab, (sub / "m.model").string()).is_ok());
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(sub)) names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"m.model"});
  fs::remove_all(sub);
}

// SentencePiece skips training sentences longer than max_sentence_length; documents are
// cut into chunks (after a newline, else before a space, else at a UTF-8 boundary), so a
// corpus of one long document still trains.
TEST_F(TokenizerTest, LongDocumentsAreCutIntoTrainingSentences) {
  std::string doc;
  for (const auto& d : synthetic_corpus()) doc += d + "\n";  // ~40 KB of lines
  std::string no_newline = synthetic_corpus()[0];
  while (no_newline.size() < 20000) no_newline += " " + synthetic_corpus()[1];
  for (char& c : no_newline)
    if (c == '\n') c = ' ';
  std::string no_space;
  for (int i = 0; i < 9000; ++i) no_space += "\xC3\xA9";  // 18 KB of 'é', nowhere to cut
  std::string path = (*dir_ / "long.model").string();
  Status s = Tokenizer::train({doc + no_newline + no_space + "\nend"}, kVocab, path);
  ASSERT_TRUE(s.is_ok()) << s.message();
  auto tok = Tokenizer::load(path);
  ASSERT_TRUE(tok.is_ok()) << tok.status().message();
  std::vector<int32_t> ids = tok->encode(no_space);
  EXPECT_EQ(tok->decode(ids), no_space);
  EXPECT_LT(ids.size(), 9000u / 4) << "runs of 'é' were learned as pieces";
}

TEST_F(TokenizerTest, VocabularyTooLargeOrTooSmallNamesTheKey) {
  std::string path = (*dir_ / "bad_vocab.model").string();
  Status big = Tokenizer::train(synthetic_corpus(), 5000, path);
  ASSERT_FALSE(big.is_ok());
  EXPECT_EQ(big.code(), Code::kInvalidArgument);
  const std::string want =
      "[data] tokenizer: model.vocab_size = 5000 is too large for this "
      "corpus (at most ";
  EXPECT_EQ(big.message().rfind(want, 0), 0u) << big.message();
  Status small = Tokenizer::train(synthetic_corpus(), 260, path);
  ASSERT_FALSE(small.is_ok());
  EXPECT_EQ(small.code(), Code::kInvalidArgument);
  EXPECT_EQ(small.message().rfind("[data] tokenizer: model.vocab_size = 260 is too small", 0), 0u)
      << small.message();
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(Tokenizer::train({}, kVocab, path).is_ok());
}

TEST_F(TokenizerTest, LoadRejectsMissingAndCorruptFiles) {
  std::string missing = (*dir_ / "missing.model").string();
  auto m = Tokenizer::load(missing);
  ASSERT_FALSE(m.is_ok());
  EXPECT_EQ(m.status().code(), Code::kNotFound);
  EXPECT_NE(m.status().message().find("[data] tokenizer model " + missing), std::string::npos)
      << m.status().message();

  std::string good = read_bytes(*model_);
  const std::vector<std::string> corrupt = {"this is not a protobuf \xFF\xFF\xFF",
                                            good.substr(0, good.size() / 2), ""};
  for (size_t i = 0; i < corrupt.size(); ++i) {
    std::string path = (*dir_ / ("corrupt" + std::to_string(i) + ".model")).string();
    std::ofstream(path, std::ios::binary) << corrupt[i];
    auto c = Tokenizer::load(path);
    ASSERT_FALSE(c.is_ok()) << "case " << i;
    EXPECT_EQ(c.status().code(), Code::kCorrupt) << c.status().message();
    EXPECT_EQ(c.status().message().rfind("[data] tokenizer model " + path, 0), 0u)
        << c.status().message();
  }
}

TEST_F(TokenizerTest, MovedTokenizerKeepsWorking) {
  Tokenizer a = load();
  uint64_t fp = a.fingerprint();
  Tokenizer b = std::move(a);
  EXPECT_EQ(b.fingerprint(), fp);
  EXPECT_EQ(b.decode(b.encode("moved \xE2\x96\x81 ok")), "moved \xE2\x96\x81 ok");
}

}  // namespace
}  // namespace crucible::data
