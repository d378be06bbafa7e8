// GPT-2's byte-level BPE without Python: the pre-tokenizer's cuts (expected
// values from HF tokenizers' ByteLevel pre-tokenizer), the bytes-to-unicode
// table, merges by rank, losslessness, and the refusals of malformed files.
// Parity with HF `tokenizers` on a large text sample: tests/hf/hf_tokenizer_test.cc.
#include "data/bpe_tokenizer.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "data/gpt2_pretokenize.h"
#include "support/files.h"

namespace crucible::data {
namespace {

std::vector<std::string> cuts(std::string_view s) {
  std::vector<std::string> out;
  for (auto p : gpt2_pretokenize(s)) out.emplace_back(p);
  return out;
}

TEST(Gpt2Pretokenize, CutsAsTheRegex) {
  using V = std::vector<std::string>;
  EXPECT_EQ(cuts("it's  fine\n\nok"), (V{"it", "'s", " ", " fine", "\n", "\n", "ok"}));
  EXPECT_EQ(cuts("x 123abc  "), (V{"x", " 123", "abc", "  "}));
  EXPECT_EQ(cuts("a\t\tb"), (V{"a", "\t", "\t", "b"}));
  EXPECT_EQ(cuts(" 'll 'LL''s"), (V{" '", "ll", " '", "LL", "''", "s"}));
  EXPECT_EQ(cuts("日本語 テスト!!? 4½"), (V{"日本語", " テスト", "!!?", " 4½"}));
  EXPECT_EQ(cuts("end   "), (V{"end", "   "}));
  EXPECT_EQ(cuts("we'd they're I've"), (V{"we", "'d", " they", "'re", " I", "'ve"}));
  EXPECT_TRUE(cuts("").empty());
  // An invalid byte is a character of its own kind; nothing is lost.
  const std::string bad = "a\xff\xfe b";
  std::string joined;
  for (const auto& c : cuts(bad)) joined += c;
  EXPECT_EQ(joined, bad);
}

TEST(Gpt2ByteChars, PrintableAndDistinct) {
  std::set<std::string> seen;
  for (int b = 0; b < 256; ++b) seen.insert(gpt2_byte_char(uint8_t(b)));
  EXPECT_EQ(seen.size(), 256u);
  EXPECT_EQ(gpt2_byte_char('A'), "A");
  EXPECT_EQ(gpt2_byte_char(' '), "\xC4\xA0");   // Ġ
  EXPECT_EQ(gpt2_byte_char('\n'), "\xC4\x8A");  // Ċ
}

// The 256 byte symbols, <|endoftext|>, and merges of "Ġ t", "h e", "Ġt he".
BpeTokenizer small_tokenizer() {
  std::vector<std::pair<std::string, int32_t>> vocab;
  for (int b = 0; b < 256; ++b) vocab.emplace_back(gpt2_byte_char(uint8_t(b)), b);
  const std::string G = gpt2_byte_char(' ');
  for (const std::string& t : {G + "t", std::string("he"), G + "the", std::string("<|endoftext|>")})
    vocab.emplace_back(t, int32_t(vocab.size()));
  auto tok = BpeTokenizer::from_parts(vocab, {{G, "t"}, {"h", "e"}, {G + "t", "he"}}, "small");
  EXPECT_TRUE(tok.is_ok()) << tok.status().message();
  return std::move(*tok);
}

TEST(BpeTokenizer, MergesByRankAndDecodesLosslessly) {
  BpeTokenizer tok = small_tokenizer();
  EXPECT_EQ(tok.vocab_size(), 260);
  EXPECT_EQ(tok.eos_id(), 259);
  EXPECT_EQ(tok.encode(" the"), (std::vector<int32_t>{258}));
  EXPECT_EQ(tok.encode("he the"), (std::vector<int32_t>{257, 258}));
  EXPECT_EQ(tok.encode(" th"), (std::vector<int32_t>{256, 'h'}));
  for (std::string s : {"", "plain", "tabs\t\tand  runs   of spaces\n\n",
                        "emoji 😀👍🏽, CJK 中文, ▁ U+2581", "<|endoftext|> is text",
                        "\x01\x7f control"}) {
    auto ids = tok.encode(s);
    EXPECT_EQ(tok.decode(ids), s);
    for (int32_t id : ids) EXPECT_NE(id, tok.eos_id()) << "eos from text: " << s;
  }
  const int32_t eos = tok.eos_id();
  EXPECT_EQ(tok.decode(&eos, 1), "");
}

// A pre-token of a million equal characters: merges by rank in O(n log n)
// (a quadratic merge loop would take minutes), leftmost pairs first.
TEST(BpeTokenizer, LongPreTokenMergesLeftmostFirst) {
  std::vector<std::pair<std::string, int32_t>> vocab;
  for (int b = 0; b < 256; ++b) vocab.emplace_back(gpt2_byte_char(uint8_t(b)), b);
  for (const char* t : {"aa", "aaaa", "<|endoftext|>"})
    vocab.emplace_back(t, int32_t(vocab.size()));
  auto tok = BpeTokenizer::from_parts(vocab, {{"a", "a"}, {"aa", "aa"}}, "long");
  ASSERT_TRUE(tok.is_ok());
  EXPECT_EQ(tok->encode("aaaaaaa"), (std::vector<int32_t>{257, 256, 'a'}));  // aaaa aa a
  const std::vector<int32_t> ids = tok->encode(std::string(1'000'001, 'a'));
  ASSERT_EQ(ids.size(), 250'001u);
  EXPECT_EQ(ids.front(), 257);
  EXPECT_EQ(ids.back(), 'a');
}

TEST(BpeTokenizer, SavesAndLoadsBack) {
  testutil::TempDir dir("bpe_save");
  BpeTokenizer tok = small_tokenizer();
  ASSERT_TRUE(tok.save(dir.path()).is_ok());
  auto back = BpeTokenizer::load(dir / "vocab.json", dir / "merges.txt");
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(back->fingerprint(), tok.fingerprint());
  EXPECT_EQ(back->encode("he the then"), tok.encode("he the then"));
}

TEST(BpeTokenizer, RefusesMalformedFiles) {
  testutil::TempDir dir("bpe_bad");
  const std::string G = gpt2_byte_char(' ');
  auto expect_refused = [&](const std::string& vocab, const std::string& merges,
                            const std::string& needle) {
    testutil::write_file(dir / "vocab.json", vocab);
    testutil::write_file(dir / "merges.txt", merges);
    auto t = BpeTokenizer::load(dir / "vocab.json", dir / "merges.txt");
    ASSERT_FALSE(t.is_ok()) << needle;
    EXPECT_NE(t.status().message().find(needle), std::string::npos) << t.status().message();
    EXPECT_EQ(t.status().message().find('\n'), std::string::npos);
  };
  std::string bytes;
  for (int b = 0; b < 256; ++b) {
    std::string c = gpt2_byte_char(uint8_t(b));
    bytes += (b ? "," : "") + std::string("\"") +
             (c == "\""   ? "\\\""
              : c == "\\" ? "\\\\"
                          : c) +
             "\":" + std::to_string(b);
  }
  expect_refused("{" + bytes + "}", "", "no <|endoftext|>");
  expect_refused("{\"a\":0,\"<|endoftext|>\":1}", "", "is not in the vocabulary");
  expect_refused("{" + bytes + ",\"<|endoftext|>\":256}", "#version: 0.2\nq z\n", "merge 1");
  expect_refused("{" + bytes + ",\"<|endoftext|>\":256}", "a b c\n", "not a merge");
  expect_refused("{" + bytes + ",\"<|endoftext|>\":300}", "", "token ids");
  expect_refused("not json", "", "vocab.json");
}

}  // namespace
}  // namespace crucible::data
