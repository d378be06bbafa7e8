#include "data/shard.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <xxhash.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <vector>

#include "core/rng.h"
#include "support/files.h"

namespace crucible::data {
namespace {

namespace fs = std::filesystem;

// A fresh directory per test, removed afterwards.
class ShardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_ = std::make_unique<testutil::TempDir>("shard_" + testutil::current_test_name());
    dir_ = tmp_->path();
  }
  void TearDown() override { tmp_.reset(); }
  std::string file(const std::string& name) const { return (dir_ / name).string(); }

  std::unique_ptr<testutil::TempDir> tmp_;
  fs::path dir_;
};

std::vector<int32_t> random_tokens(size_t n, uint32_t vocab, uint64_t seed) {
  Rng rng(seed, 1);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = int32_t(rng.next_u32() % vocab);
  return t;
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

template <typename T>
T field(const std::vector<uint8_t>& bytes, size_t off) {
  T v;
  std::memcpy(&v, bytes.data() + off, sizeof(T));
  return v;
}

template <typename T>
void set_field(std::vector<uint8_t>& bytes, size_t off, T v) {
  std::memcpy(bytes.data() + off, &v, sizeof(T));
}

void expect_round_trip(const std::string& path, const std::vector<int32_t>& tokens, uint32_t vocab,
                       uint32_t want_dtype) {
  ASSERT_TRUE(write_token_shard(path, tokens.data(), tokens.size(), vocab, 0xfeedf00dull).is_ok());
  auto shard = TokenShard::open(path);
  ASSERT_TRUE(shard.is_ok()) << shard.status().message();
  EXPECT_EQ(shard->info().version, kShardVersion);
  EXPECT_EQ(shard->info().dtype, want_dtype);
  EXPECT_EQ(shard->info().vocab_size, vocab);
  EXPECT_EQ(shard->info().token_count, tokens.size());
  EXPECT_EQ(shard->info().tokenizer_fingerprint, 0xfeedf00dull);
  EXPECT_EQ(shard->path(), path);
  ASSERT_EQ(shard->size(), tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) ASSERT_EQ((*shard)[i], tokens[i]) << i;
  std::vector<int32_t> out(tokens.size(), -1);
  shard->copy(0, tokens.size(), out.data());
  EXPECT_EQ(out, tokens);
  if (tokens.size() < 15) return;
  // An interior range, with a sentinel just past it.
  std::vector<int32_t> part(11, -7);
  shard->copy(5, 10, part.data());
  EXPECT_TRUE(std::equal(part.begin(), part.begin() + 10, tokens.begin() + 5));
  EXPECT_EQ(part[10], -7);
}

TEST_F(ShardTest, RoundTripUint16) {
  auto tokens = random_tokens(100003, 50257, 1);
  tokens[7] = 50256;  // the largest id
  expect_round_trip(file("a.tok"), tokens, 50257, kShardDtypeU16);
  EXPECT_EQ(fs::file_size(file("a.tok")), 64u + 2u * tokens.size());
}

TEST_F(ShardTest, RoundTripUint32) {
  auto tokens = random_tokens(4099, 200000, 2);
  tokens[3] = 199999;
  tokens[4] = 65536;  // would wrap in uint16
  expect_round_trip(file("b.tok"), tokens, 200000, kShardDtypeU32);
  EXPECT_EQ(fs::file_size(file("b.tok")), 64u + 4u * tokens.size());
}

TEST_F(ShardTest, DtypeSwitchesAbove65536) {
  std::vector<int32_t> tokens = {0, 65535, 1, 65535};
  expect_round_trip(file("c.tok"), tokens, 65536, kShardDtypeU16);
  expect_round_trip(file("d.tok"), tokens, 65537, kShardDtypeU32);
}

TEST_F(ShardTest, EmptyShardRoundTrips) {
  ASSERT_TRUE(write_token_shard(file("e.tok"), nullptr, 0, 10, 0).is_ok());
  auto shard = TokenShard::open(file("e.tok"));
  ASSERT_TRUE(shard.is_ok()) << shard.status().message();
  EXPECT_EQ(shard->size(), 0u);
  EXPECT_EQ(fs::file_size(file("e.tok")), 64u);
}

TEST_F(ShardTest, HeaderLayoutOnDisk) {
  auto tokens = random_tokens(1000, 300, 3);
  ASSERT_TRUE(
      write_token_shard(file("h.tok"), tokens.data(), tokens.size(), 300, 0x0123456789abcdefull)
          .is_ok());
  auto bytes = read_bytes(file("h.tok"));
  ASSERT_EQ(bytes.size(), 64u + 2000u);
  EXPECT_EQ(std::memcmp(bytes.data(), "CRCTOKS\0", 8), 0);
  EXPECT_EQ(field<uint32_t>(bytes, 8), 1u);     // version
  EXPECT_EQ(field<uint32_t>(bytes, 12), 1u);    // dtype uint16
  EXPECT_EQ(field<uint32_t>(bytes, 16), 300u);  // vocab
  EXPECT_EQ(field<uint32_t>(bytes, 20), 0u);    // reserved
  EXPECT_EQ(field<uint64_t>(bytes, 24), 1000u);
  EXPECT_EQ(field<uint64_t>(bytes, 32), XXH64(bytes.data() + 64, 2000, 0));
  EXPECT_EQ(field<uint64_t>(bytes, 40), 0x0123456789abcdefull);
  for (size_t i = 48; i < 64; ++i) EXPECT_EQ(bytes[i], 0) << i;
  for (size_t i = 0; i < tokens.size(); ++i)
    ASSERT_EQ(field<uint16_t>(bytes, 64 + 2 * i), uint16_t(tokens[i])) << i;
}

TEST_F(ShardTest, WriteLeavesNoTemporaryAndReplacesAtomically) {
  auto first = random_tokens(500, 100, 4);
  auto second = random_tokens(700, 100, 5);
  ASSERT_TRUE(write_token_shard(file("x.tok"), first.data(), first.size(), 100, 1).is_ok());
  ASSERT_TRUE(write_token_shard(file("x.tok"), second.data(), second.size(), 100, 2).is_ok());
  std::vector<std::string> names;
  for (auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"x.tok"});
  auto shard = TokenShard::open(file("x.tok"));
  ASSERT_TRUE(shard.is_ok());
  EXPECT_EQ(shard->size(), 700u);
  EXPECT_EQ(shard->info().tokenizer_fingerprint, 2u);
}

TEST_F(ShardTest, TokenOutsideVocabIsRejectedAndWritesNothing) {
  std::vector<int32_t> tokens = {1, 2, 100, 3};
  Status s = write_token_shard(file("v.tok"), tokens.data(), tokens.size(), 100, 0);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("[data] shard " + file("v.tok")), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("token 100 at index 2"), std::string::npos) << s.message();
  tokens[2] = -1;
  EXPECT_FALSE(write_token_shard(file("v.tok"), tokens.data(), tokens.size(), 100, 0).is_ok());
  EXPECT_TRUE(fs::is_empty(dir_));  // neither the shard nor a temporary
  EXPECT_FALSE(write_token_shard(file("v.tok"), tokens.data(), tokens.size(), 0, 0).is_ok());
}

class ShardCorruptionTest : public ShardTest {
 protected:
  void SetUp() override {
    ShardTest::SetUp();
    tokens_ = random_tokens(1000, 1000, 6);
    path_ = file("c.tok");
    ASSERT_TRUE(write_token_shard(path_, tokens_.data(), tokens_.size(), 1000, 9).is_ok());
    bytes_ = read_bytes(path_);
  }
  // Opens the damaged file (with and without verify) and returns both errors.
  std::string open_error(bool verify) {
    write_bytes(path_, bytes_);
    auto shard = TokenShard::open(path_, verify);
    if (shard.is_ok()) return "";
    EXPECT_EQ(shard.status().code(), Code::kCorrupt);
    EXPECT_EQ(shard.status().message().rfind("[data] shard " + path_ + ": ", 0), 0u)
        << shard.status().message();
    return shard.status().message();
  }
  bool has(const std::string& msg, const std::string& part) {
    return msg.find(part) != std::string::npos;
  }

  std::vector<int32_t> tokens_;
  std::string path_;
  std::vector<uint8_t> bytes_;
};

TEST_F(ShardCorruptionTest, FlippedPayloadBitFailsChecksumUnlessVerifyIsOff) {
  bytes_[64 + 777] ^= 0x10;
  EXPECT_TRUE(has(open_error(true), "checksum mismatch (file is corrupt)"));
  EXPECT_EQ(open_error(false), "");  // verify=false skips only the checksum
}

TEST_F(ShardCorruptionTest, FlippedChecksumFieldFailsChecksum) {
  bytes_[33] ^= 0x01;
  EXPECT_TRUE(has(open_error(true), "checksum mismatch"));
}

TEST_F(ShardCorruptionTest, TruncatedPayload) {
  bytes_.resize(bytes_.size() - 3);
  for (bool verify : {true, false}) {
    std::string msg = open_error(verify);
    EXPECT_TRUE(has(msg, "truncated (expected 2064 bytes, found 2061)")) << msg;
  }
}

TEST_F(ShardCorruptionTest, TruncatedHeader) {
  bytes_.resize(20);
  EXPECT_TRUE(has(open_error(false), "truncated (expected at least 64 header bytes, found 20)"));
}

TEST_F(ShardCorruptionTest, TrailingBytes) {
  bytes_.push_back(0);
  bytes_.push_back(0);
  EXPECT_TRUE(has(open_error(false), "trailing data (expected 2064 bytes, found 2066)"));
}

TEST_F(ShardCorruptionTest, BadMagic) {
  bytes_[0] = 'X';
  EXPECT_TRUE(has(open_error(false), "bad magic"));
}

TEST_F(ShardCorruptionTest, WrongVersion) {
  set_field<uint32_t>(bytes_, 8, 2);
  EXPECT_TRUE(has(open_error(false), "unsupported version 2 (this build reads version 1)"));
}

TEST_F(ShardCorruptionTest, UnknownDtype) {
  set_field<uint32_t>(bytes_, 12, 3);
  EXPECT_TRUE(has(open_error(false), "unknown dtype 3"));
}

TEST_F(ShardCorruptionTest, WrongTokenCount) {
  set_field<uint64_t>(bytes_, 24, 1001);
  EXPECT_TRUE(has(open_error(false), "truncated (expected 2066 bytes, found 2064)"));
  set_field<uint64_t>(bytes_, 24, ~uint64_t(0));
  EXPECT_TRUE(has(open_error(false), "impossibly large"));
}

TEST_F(ShardCorruptionTest, VocabTooLargeForUint16) {
  set_field<uint32_t>(bytes_, 16, 70000);
  EXPECT_TRUE(has(open_error(false), "vocab_size 70000 is impossible"));
}

TEST_F(ShardTest, MissingFileIsNotFound) {
  auto shard = TokenShard::open(file("nope.tok"));
  ASSERT_FALSE(shard.is_ok());
  EXPECT_EQ(shard.status().code(), Code::kNotFound);
  EXPECT_NE(shard.status().message().find(file("nope.tok")), std::string::npos);
}

TEST_F(ShardTest, MovedShardKeepsItsMapping) {
  auto tokens = random_tokens(300, 50, 7);
  ASSERT_TRUE(write_token_shard(file("m.tok"), tokens.data(), tokens.size(), 50, 0).is_ok());
  auto opened = TokenShard::open(file("m.tok"));
  ASSERT_TRUE(opened.is_ok());
  TokenShard a = std::move(opened).value();
  TokenShard b = std::move(a);
  EXPECT_EQ(a.size(), 0u);  // NOLINT(bugprone-use-after-move): moved-from is empty
  ASSERT_EQ(b.size(), 300u);
  EXPECT_EQ(b[299], tokens[299]);
  auto other = TokenShard::open(file("m.tok"));
  ASSERT_TRUE(other.is_ok());
  b = std::move(other).value();  // unmaps the old mapping, takes the new one
  EXPECT_EQ(b[0], tokens[0]);
}

}  // namespace
}  // namespace crucible::data
