// Token shards: a tokenized corpus on disk, one flat sequence of token ids
// (documents joined by the tokenizer's separator), read back memory-mapped.
// Format (docs/formats.md, "Token shards"), little-endian: a 64-byte header
// {magic "CRCTOKS\0", u32 version = 1, u32 dtype (1 = uint16, 2 = uint32),
// u32 vocab_size, u32 reserved, u64 token_count, u64 xxh64 of the payload,
// u64 tokenizer fingerprint, zero padding}, then token_count tokens.
// Writes are atomic (temporary file, fsync, rename, directory fsync): a reader
// sees the old file or the whole new one, never a half-written shard.
// TokenShard is immutable after open(); concurrent reads from any number of
// threads are safe.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/status.h"

namespace crucible::data {

inline constexpr uint32_t kShardVersion = 1;
inline constexpr uint32_t kShardDtypeU16 = 1;
inline constexpr uint32_t kShardDtypeU32 = 2;
inline constexpr size_t kShardHeaderBytes = 64;

struct ShardInfo {
  uint32_t version = 0;
  uint32_t dtype = 0;  // kShardDtypeU16 or kShardDtypeU32
  uint32_t vocab_size = 0;
  uint64_t token_count = 0;
  uint64_t checksum = 0;               // XXH64 (seed 0) of the payload bytes
  uint64_t tokenizer_fingerprint = 0;  // opaque; lets a run refuse shards of another tokenizer
};

// Writes tokens[0, n) to `path`, as uint16 when vocab_size <= 65536 and uint32
// otherwise. Every token must lie in [0, vocab_size); vocab_size must lie in
// [1, 2^31] so that every id fits the int32 the readers return. Memory use is
// constant in n (the payload is converted and hashed in chunks).
Status write_token_shard(const std::string& path, const int32_t* tokens, size_t n,
                         uint32_t vocab_size, uint64_t tokenizer_fingerprint);

// A read-only memory-mapped shard. open() validates the magic, version, dtype,
// vocab size, that the file size is exactly 64 + token_count * width and, with
// verify = true, the payload checksum (one sequential pass over the file). Each
// failure is one Status naming the file and the problem. Move-only; the mapping
// lives until destruction (a moved-from shard is empty).
class TokenShard {
 public:
  static Result<TokenShard> open(const std::string& path, bool verify = true);

  TokenShard(TokenShard&& other) noexcept;
  TokenShard& operator=(TokenShard&& other) noexcept;
  TokenShard(const TokenShard&) = delete;
  TokenShard& operator=(const TokenShard&) = delete;
  ~TokenShard();

  const ShardInfo& info() const { return info_; }
  size_t size() const { return size_t(info_.token_count); }  // tokens
  const std::string& path() const { return path_; }

  int32_t operator[](size_t i) const;
  // out[0, n) = tokens [begin, begin + n), widened to int32. Requires begin + n <= size().
  void copy(size_t begin, size_t n, int32_t* out) const;

 private:
  TokenShard() = default;
  void unmap();

  std::string path_;
  ShardInfo info_;
  void* map_ = nullptr;  // the whole file, PROT_READ
  size_t map_bytes_ = 0;
  const void* payload_ = nullptr;  // map_ + 64
};

}  // namespace crucible::data
