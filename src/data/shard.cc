#include "data/shard.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/file_io.h"

namespace crucible::data {
namespace {

static_assert(std::endian::native == std::endian::little,
              "token shards are little-endian and read by mapping them directly");

constexpr char kMagic[8] = {'C', 'R', 'C', 'T', 'O', 'K', 'S', '\0'};

// Byte offsets of the header fields (docs/formats.md).
constexpr size_t kOffMagic = 0, kOffVersion = 8, kOffDtype = 12, kOffVocab = 16,
                 kOffTokenCount = 24, kOffChecksum = 32, kOffFingerprint = 40;

std::string prefix(const std::string& path) { return "[data] shard " + path + ": "; }

size_t dtype_width(uint32_t dtype) {
  return dtype == kShardDtypeU16 ? 2 : dtype == kShardDtypeU32 ? 4 : 0;
}

template <typename T>
void put(uint8_t* header, size_t off, T v) {
  std::memcpy(header + off, &v, sizeof(T));
}
template <typename T>
T get(const uint8_t* header, size_t off) {
  T v;
  std::memcpy(&v, header + off, sizeof(T));
  return v;
}

// Narrows tokens[0, n) to `Word` in chunks, streaming them to the file and
// into the hash, so a shard of any size is written in constant memory.
template <typename Word>
Status write_payload(AtomicFile& file, const std::string& path, const int32_t* tokens, size_t n,
                     uint32_t vocab_size, XXH64_state_t* hash) {
  constexpr size_t kChunk = size_t(1) << 16;
  std::vector<Word> buf(std::min(n, kChunk));
  for (size_t begin = 0; begin < n; begin += kChunk) {
    size_t len = std::min(kChunk, n - begin);
    for (size_t i = 0; i < len; ++i) {
      int32_t t = tokens[begin + i];
      if (t < 0 || uint32_t(t) >= vocab_size)
        return Status::invalid(prefix(path) + "token " + std::to_string(t) + " at index " +
                               std::to_string(begin + i) + " is outside the vocabulary [0, " +
                               std::to_string(vocab_size) + ")");
      buf[i] = Word(t);
    }
    XXH64_update(hash, buf.data(), len * sizeof(Word));
    CRUCIBLE_RETURN_IF_ERROR(file.write(buf.data(), len * sizeof(Word)));
  }
  return Status::ok();
}

}  // namespace

Status write_token_shard(const std::string& path, const int32_t* tokens, size_t n,
                         uint32_t vocab_size, uint64_t tokenizer_fingerprint) {
  if (vocab_size == 0 || vocab_size > (uint32_t(1) << 31))
    return Status::invalid(prefix(path) + "vocab_size " + std::to_string(vocab_size) +
                           " is outside [1, 2^31]");
  if (n > 0 && tokens == nullptr) return Status::invalid(prefix(path) + "tokens is null");
  const uint32_t dtype = vocab_size <= 65536 ? kShardDtypeU16 : kShardDtypeU32;

  AtomicFile file;
  CRUCIBLE_RETURN_IF_ERROR(file.open(path));
  // The header goes last (pwrite at 0) because it holds the payload's hash.
  uint8_t header[kShardHeaderBytes] = {};
  CRUCIBLE_RETURN_IF_ERROR(file.write(header, sizeof(header)));
  std::unique_ptr<XXH64_state_t, decltype(&XXH64_freeState)> hash(XXH64_createState(),
                                                                  &XXH64_freeState);
  CRUCIBLE_CHECK(hash != nullptr, "XXH64_createState allocation");
  XXH64_reset(hash.get(), 0);
  Status s = dtype == kShardDtypeU16
                 ? write_payload<uint16_t>(file, path, tokens, n, vocab_size, hash.get())
                 : write_payload<uint32_t>(file, path, tokens, n, vocab_size, hash.get());
  if (!s.is_ok()) return s;  // the AtomicFile removes its temporary

  std::memcpy(header + kOffMagic, kMagic, sizeof(kMagic));
  put<uint32_t>(header, kOffVersion, kShardVersion);
  put<uint32_t>(header, kOffDtype, dtype);
  put<uint32_t>(header, kOffVocab, vocab_size);
  put<uint64_t>(header, kOffTokenCount, uint64_t(n));
  put<uint64_t>(header, kOffChecksum, XXH64_digest(hash.get()));
  put<uint64_t>(header, kOffFingerprint, tokenizer_fingerprint);
  CRUCIBLE_RETURN_IF_ERROR(file.pwrite(header, sizeof(header), 0));
  return file.commit();
}

Result<TokenShard> TokenShard::open(const std::string& path, bool verify) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    std::string msg = prefix(path) + "cannot open: " + errno_str();
    return errno == ENOENT ? Status::not_found(msg) : Status::io(msg);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    std::string msg = prefix(path) + "cannot stat: " + errno_str();
    ::close(fd);
    return Status::io(msg);
  }
  const uint64_t file_bytes = uint64_t(st.st_size);
  if (file_bytes < kShardHeaderBytes) {
    ::close(fd);
    return Status::corrupt(prefix(path) + "truncated (expected at least " +
                           std::to_string(kShardHeaderBytes) + " header bytes, found " +
                           std::to_string(file_bytes) + ")");
  }
  void* map = ::mmap(nullptr, size_t(file_bytes), PROT_READ, MAP_SHARED, fd, 0);
  int map_errno = errno;
  ::close(fd);  // the mapping keeps the file referenced
  if (map == MAP_FAILED)
    return Status::io(prefix(path) + "mmap failed: " + std::strerror(map_errno));

  TokenShard shard;  // from here on, its destructor unmaps on every error path
  shard.path_ = path;
  shard.map_ = map;
  shard.map_bytes_ = size_t(file_bytes);
  const auto* h = static_cast<const uint8_t*>(map);
  if (std::memcmp(h + kOffMagic, kMagic, sizeof(kMagic)) != 0)
    return Status::corrupt(prefix(path) + "bad magic (not a crucible token shard)");
  ShardInfo& info = shard.info_;
  info.version = get<uint32_t>(h, kOffVersion);
  info.dtype = get<uint32_t>(h, kOffDtype);
  info.vocab_size = get<uint32_t>(h, kOffVocab);
  info.token_count = get<uint64_t>(h, kOffTokenCount);
  info.checksum = get<uint64_t>(h, kOffChecksum);
  info.tokenizer_fingerprint = get<uint64_t>(h, kOffFingerprint);
  if (info.version != kShardVersion)
    return Status::corrupt(prefix(path) + "unsupported version " + std::to_string(info.version) +
                           " (this build reads version " + std::to_string(kShardVersion) + ")");
  const size_t width = dtype_width(info.dtype);
  if (width == 0)
    return Status::corrupt(prefix(path) + "unknown dtype " + std::to_string(info.dtype) +
                           " (expected 1 = uint16 or 2 = uint32)");
  if (info.vocab_size == 0 || info.vocab_size > (uint32_t(1) << 31) ||
      (info.dtype == kShardDtypeU16 && info.vocab_size > 65536))
    return Status::corrupt(prefix(path) + "vocab_size " + std::to_string(info.vocab_size) +
                           " is impossible for dtype " + std::to_string(info.dtype));
  if (info.token_count > (UINT64_MAX - kShardHeaderBytes) / width)
    return Status::corrupt(prefix(path) + "token_count " + std::to_string(info.token_count) +
                           " is impossibly large");
  const uint64_t expected = kShardHeaderBytes + info.token_count * width;
  if (file_bytes != expected)
    return Status::corrupt(prefix(path) + (file_bytes < expected ? "truncated" : "trailing data") +
                           " (expected " + std::to_string(expected) + " bytes, found " +
                           std::to_string(file_bytes) + ")");
  shard.payload_ = h + kShardHeaderBytes;
  if (verify) {
    ::madvise(map, shard.map_bytes_, MADV_SEQUENTIAL);
    uint64_t sum = XXH64(shard.payload_, size_t(info.token_count * width), 0);
    if (sum != info.checksum)
      return Status::corrupt(prefix(path) + "checksum mismatch (file is corrupt)");
    // A valid checksum says the bytes are as written, not that the writer
    // kept its ids below the header's vocab_size: training would stop with
    // an invariant failure in the loss mid-run.
    uint64_t max_id = 0;
    if (info.dtype == kShardDtypeU16) {
      const uint16_t* t = static_cast<const uint16_t*>(shard.payload_);
      uint16_t m = 0;
      for (uint64_t i = 0; i < info.token_count; ++i) m = t[i] > m ? t[i] : m;
      max_id = m;
    } else {
      const uint32_t* t = static_cast<const uint32_t*>(shard.payload_);
      uint32_t m = 0;
      for (uint64_t i = 0; i < info.token_count; ++i) m = t[i] > m ? t[i] : m;
      max_id = m;
    }
    if (info.token_count > 0 && max_id >= info.vocab_size)
      return Status::corrupt(prefix(path) + "holds token id " + std::to_string(max_id) +
                             ", not below its vocab_size " + std::to_string(info.vocab_size));
  }
  // Training reads short samples in shuffled order, where read-ahead only wastes
  // I/O. (verify has just pulled a shard that fits in RAM into the page cache.)
  ::madvise(map, shard.map_bytes_, MADV_RANDOM);
  return shard;
}

TokenShard::TokenShard(TokenShard&& other) noexcept
    : path_(std::move(other.path_)),
      info_(std::exchange(other.info_, ShardInfo{})),
      map_(std::exchange(other.map_, nullptr)),
      map_bytes_(std::exchange(other.map_bytes_, 0)),
      payload_(std::exchange(other.payload_, nullptr)) {}

TokenShard& TokenShard::operator=(TokenShard&& other) noexcept {
  if (this != &other) {
    unmap();
    path_ = std::move(other.path_);
    info_ = std::exchange(other.info_, ShardInfo{});
    map_ = std::exchange(other.map_, nullptr);
    map_bytes_ = std::exchange(other.map_bytes_, 0);
    payload_ = std::exchange(other.payload_, nullptr);
  }
  return *this;
}

TokenShard::~TokenShard() { unmap(); }

void TokenShard::unmap() {
  if (map_ != nullptr) ::munmap(map_, map_bytes_);
  map_ = nullptr;
  map_bytes_ = 0;
  payload_ = nullptr;
}

int32_t TokenShard::operator[](size_t i) const {
  CRUCIBLE_CHECK(i < size(), "token index within the shard");
  if (info_.dtype == kShardDtypeU16) return static_cast<const uint16_t*>(payload_)[i];
  return int32_t(static_cast<const uint32_t*>(payload_)[i]);
}

void TokenShard::copy(size_t begin, size_t n, int32_t* out) const {
  CRUCIBLE_CHECK(begin <= size() && n <= size() - begin, "token range within the shard");
  if (info_.dtype == kShardDtypeU16) {
    const uint16_t* src = static_cast<const uint16_t*>(payload_) + begin;
    for (size_t i = 0; i < n; ++i) out[i] = src[i];
  } else {
    // ids are < 2^31 (checked on open), so uint32 and int32 share their bits.
    std::memcpy(out, static_cast<const uint32_t*>(payload_) + begin, n * sizeof(int32_t));
  }
}

}  // namespace crucible::data
