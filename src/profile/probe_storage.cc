#include "profile/probe_storage.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <vector>

#include "core/clock.h"
#include "core/file_io.h"
#include "core/rng.h"

namespace crucible::profile {
namespace {

constexpr size_t kPage = 4096;
constexpr size_t kBlock = size_t(4) << 20;  // sequential I/O unit; also the pattern period
constexpr size_t kStorageMiB = size_t(1) << 20;
constexpr size_t kMinFileBytes = kStorageMiB;

// The pattern's fixed part: 4 MiB of Philox output, made once per process.
const unsigned char* pattern_block() {
  static const std::vector<uint32_t> block = [] {
    std::vector<uint32_t> b(kBlock / sizeof(uint32_t));
    Rng rng(/*seed=*/0x5702A6E, /*stream=*/0);
    for (auto& w : b) w = rng.next_u32();
    return b;
  }();
  return reinterpret_cast<const unsigned char*>(block.data());
}

// Writes each page's offset stamp into a buffer already holding the pattern
// block (the rest of every page is the same for all blocks).
void stamp_pages(uint64_t offset, unsigned char* buf, size_t n) {
  for (size_t p = 0; p < n; p += kPage) {
    uint64_t stamp = offset + p;
    std::memcpy(buf + p, &stamp, sizeof(stamp));
  }
}

// check_probe_pattern without the module prefix; `file` names what was read.
Status verify_pattern(uint64_t offset, const void* buf, size_t n, const std::string& file = "") {
  const auto* in = static_cast<const unsigned char*>(buf);
  const unsigned char* block = pattern_block();
  for (size_t p = 0; p < n; p += kPage) {
    const uint64_t page_off = offset + p;
    const size_t len = std::min(kPage, n - p);
    unsigned char expected[kPage];
    std::memcpy(expected, block + page_off % kBlock, len);
    std::memcpy(expected, &page_off, std::min(len, sizeof(page_off)));
    if (std::memcmp(in + p, expected, len) == 0) continue;
    size_t i = 0;
    while (in[p + i] == expected[i]) ++i;
    return Status::corrupt(fmt::format(
        "data read back{} differs from what was written at file offset {} (byte 0x{:02x}, "
        "expected 0x{:02x}){}",
        file.empty() ? "" : " from " + file, page_off + i, in[p + i], expected[i],
        i < sizeof(page_off) ? ": page from another offset" : ""));
  }
  return Status::ok();
}

struct FreeDeleter {
  void operator()(unsigned char* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<unsigned char, FreeDeleter>;

// The probe file: closed and removed on every path out.
class ProbeFile {
 public:
  explicit ProbeFile(std::string path) : path_(std::move(path)) {}
  ~ProbeFile() {
    close_fd();
    if (created_) ::unlink(path_.c_str());
  }
  ProbeFile(const ProbeFile&) = delete;
  ProbeFile& operator=(const ProbeFile&) = delete;

  Status create() {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd_ < 0) return Status::io("cannot create " + path_ + ": " + errno_str());
    created_ = true;
    return Status::ok();
  }
  // Reopens for reading; with O_DIRECT when `direct` and the file system takes it.
  Status open_read(bool direct, bool* got_direct) {
    close_fd();
    *got_direct = false;
    if (direct) {
      fd_ = ::open(path_.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
      if (fd_ >= 0) {
        *got_direct = true;
        return Status::ok();
      }
    }
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) return Status::io("cannot open " + path_ + ": " + errno_str());
    return Status::ok();
  }
  void close_fd() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
  bool created_ = false;
};

// Drops the file's clean pages from the page cache so the next reads go to
// the device; tells the kernel whether to read ahead.
void make_cold(int fd, bool random) {
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::posix_fadvise(fd, 0, 0, random ? POSIX_FADV_RANDOM : POSIX_FADV_SEQUENTIAL);
}

// pread of exactly n bytes (short reads continue; 0 bytes is an error here).
Status read_exact(int fd, unsigned char* buf, size_t n, uint64_t offset, const std::string& path,
                  int* err = nullptr) {
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::pread(fd, buf + done, n - done, off_t(offset + done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && err) *err = errno;
    if (r < 0)
      return Status::io("read of " + path + " at " + std::to_string(offset + done) +
                        " failed: " + errno_str());
    if (r == 0)
      return Status::io("unexpected end of " + path + " at " + std::to_string(offset + done));
    done += size_t(r);
  }
  return Status::ok();
}

Status write_all(int fd, const unsigned char* buf, size_t n, const std::string& path) {
  size_t done = 0;
  while (done < n) {
    ssize_t w = ::write(fd, buf + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return Status::io("write to " + path + " failed: " + errno_str());
    done += size_t(w);
  }
  return Status::ok();
}

// Nearest-rank percentile of sorted values.
double percentile(const std::vector<double>& sorted, double p) {
  size_t rank = size_t(std::ceil(p * double(sorted.size())));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

// The measurement itself; fills `j` as it goes so a late failure keeps the
// numbers measured before it.
Status run_probe(const StorageOptions& o, size_t file_bytes, nlohmann::json& j) {
  static std::atomic<int> calls{0};
  int call = calls++;
  std::string name = ".crucible-probe-" + std::to_string(::getpid());
  if (call > 0) name += "-" + std::to_string(call);
  ProbeFile file(o.dir + "/" + name);

  Buffer buf(static_cast<unsigned char*>(std::aligned_alloc(kPage, kBlock)));
  if (!buf) return Status::internal("cannot allocate a 4 MiB I/O buffer");
  std::memcpy(buf.get(), pattern_block(), kBlock);  // also pre-faults the buffer

  // Sequential write, made durable: what a checkpoint save costs.
  CRUCIBLE_RETURN_IF_ERROR(file.create());
  int64_t t0 = now_ns();
  for (uint64_t off = 0; off < file_bytes; off += kBlock) {
    size_t n = std::min<uint64_t>(kBlock, file_bytes - off);
    stamp_pages(off, buf.get(), n);
    CRUCIBLE_RETURN_IF_ERROR(write_all(file.fd(), buf.get(), n, file.path()));
  }
  if (::fsync(file.fd()) != 0)
    return Status::io("fsync of " + file.path() + " failed: " + errno_str());
  double write_s = double(std::max<int64_t>(now_ns() - t0, 1)) * 1e-9;
  j["seq_write_gbs"] = double(file_bytes) / write_s * 1e-9;

  // Sequential cold read, every block verified.
  bool direct = false;
  CRUCIBLE_RETURN_IF_ERROR(file.open_read(true, &direct));
  if (!direct) make_cold(file.fd(), /*random=*/false);
  int64_t read_ns = 0;
  for (uint64_t off = 0; off < file_bytes; off += kBlock) {
    size_t n = std::min<uint64_t>(kBlock, file_bytes - off);
    int64_t t = now_ns();
    int err = 0;
    Status st = read_exact(file.fd(), buf.get(), n, off, file.path(), &err);
    if (!st.is_ok() && direct && off == 0 && err == EINVAL) {
      // O_DIRECT opened but the file system refuses aligned direct reads.
      CRUCIBLE_RETURN_IF_ERROR(file.open_read(false, &direct));
      make_cold(file.fd(), false);
      t = now_ns();
      st = read_exact(file.fd(), buf.get(), n, off, file.path());
    }
    CRUCIBLE_RETURN_IF_ERROR(st);
    read_ns += now_ns() - t;
    CRUCIBLE_RETURN_IF_ERROR(verify_pattern(off, buf.get(), n, file.path()));
  }
  j["direct_io"] = direct;
  j["seq_read_gbs"] = double(file_bytes) / (double(std::max<int64_t>(read_ns, 1)) * 1e-9) * 1e-9;

  // Random 4 KiB reads at distinct pages (while there are enough): what a
  // shuffled loader over a large token file sees.
  if (!direct) make_cold(file.fd(), /*random=*/true);
  const uint64_t pages = file_bytes / kPage;
  const size_t reads =
      size_t(std::max(o.random_reads > 0 ? o.random_reads : (o.quick ? 500 : 4000), 1));
  Rng rng(/*seed=*/0x5702A6E, /*stream=*/1);
  auto draw = [&](uint64_t range) {
    uint64_t hi = rng.next_u32();  // two statements: a fixed draw order
    uint64_t r = (hi << 32) | rng.next_u32();
    return r % range;
  };
  std::vector<uint64_t> order;
  if (reads <= pages) {  // partial Fisher-Yates: `reads` distinct pages
    order.resize(pages);
    std::iota(order.begin(), order.end(), uint64_t(0));
    for (size_t i = 0; i < reads; ++i) std::swap(order[i], order[i + draw(pages - i)]);
    order.resize(reads);
  } else {
    for (size_t i = 0; i < reads; ++i) order.push_back(draw(pages));
  }
  std::vector<double> us;
  us.reserve(reads);
  for (uint64_t page : order) {
    const uint64_t off = page * kPage;
    int64_t t = now_ns();
    CRUCIBLE_RETURN_IF_ERROR(read_exact(file.fd(), buf.get(), kPage, off, file.path()));
    us.push_back(double(now_ns() - t) * 1e-3);
    CRUCIBLE_RETURN_IF_ERROR(verify_pattern(off, buf.get(), kPage, file.path()));
  }
  double mean = std::accumulate(us.begin(), us.end(), 0.0) / double(us.size());
  std::sort(us.begin(), us.end());
  j["rand_read_4k_us"] = {
      {"p50", percentile(us, 0.50)}, {"p99", percentile(us, 0.99)}, {"mean", mean}};
  j["rand_reads"] = reads;
  return Status::ok();
}

std::string gib(double bytes) {
  return bytes >= double(size_t(1) << 30)
             ? fmt::format("{:.1f} GiB", bytes / double(size_t(1) << 30))
             : fmt::format("{:.0f} MiB", bytes / double(kStorageMiB));
}

std::string one_table(const nlohmann::json& s) {
  std::string out = "storage  " + s.value("dir", std::string("?"));
  if (s.contains("filesystem"))
    out += fmt::format(" ({}, {} free)", s["filesystem"].get<std::string>(),
                       gib(s.value("free_bytes", 0.0)));
  out += "\n";
  if (s.contains("seq_write_gbs"))
    out += fmt::format("  {:<11}{:>8.2f} GB/s   4 MiB blocks + fsync, {} file\n", "seq write",
                       s["seq_write_gbs"].get<double>(), gib(s.value("file_bytes", 0.0)));
  if (s.contains("seq_read_gbs"))
    out += fmt::format("  {:<11}{:>8.2f} GB/s   cold, {}\n", "seq read",
                       s["seq_read_gbs"].get<double>(),
                       s.value("direct_io", false) ? "O_DIRECT" : "page cache dropped");
  if (s.contains("rand_read_4k_us")) {
    const auto& r = s["rand_read_4k_us"];
    out += fmt::format("  {:<11}{:>8.1f} us p50  {:.1f} us p99  {:.1f} us mean  ({} reads)\n",
                       "4K random", r.value("p50", 0.0), r.value("p99", 0.0), r.value("mean", 0.0),
                       s.value("rand_reads", 0));
  }
  if (!s.value("valid", false))
    out += "  INVALID: " + s.value("error", std::string("no result")) + "\n";
  return out;
}

}  // namespace

void fill_probe_pattern(uint64_t offset, void* buf, size_t n) {
  auto* out = static_cast<unsigned char*>(buf);
  const unsigned char* block = pattern_block();
  for (size_t done = 0; done < n;) {
    size_t at = size_t((offset + done) % kBlock);
    size_t len = std::min(n - done, kBlock - at);
    std::memcpy(out + done, block + at, len);
    done += len;
  }
  stamp_pages(offset, out, n);
}

Status check_probe_pattern(uint64_t offset, const void* buf, size_t n) {
  Status st = verify_pattern(offset, buf, n);
  return st.is_ok() ? st : Status::corrupt("[probe] storage: " + st.message());
}

std::string filesystem_name(int64_t f_type) {
  struct Magic {
    uint32_t magic;
    const char* name;
  };
  static constexpr Magic kMagics[] = {
      {0xEF53, "ext4"},      {0x58465342, "xfs"},      {0x9123683E, "btrfs"},
      {0x01021994, "tmpfs"}, {0x858458F6, "ramfs"},    {0x794C7630, "overlay"},
      {0x6969, "nfs"},       {0x2FC12FC1, "zfs"},      {0x0BD00BD0, "lustre"},
      {0x47504653, "gpfs"},  {0x00C36400, "ceph"},     {0x65735546, "fuse"},
      {0xF2F52010, "f2fs"},  {0xFF534D42, "cifs"},     {0xFE534D42, "smb2"},
      {0x01021997, "9p"},    {0x73717368, "squashfs"}, {0x4D44, "vfat"},
      {0x5346544E, "ntfs"},  {0x2011BAB0, "exfat"},    {0x3153464A, "jfs"},
      {0x9FA0, "proc"},      {0x62656572, "sysfs"},    {0xCA451A4E, "bcachefs"},
      {0x5A3C69F0, "aufs"},  {0x6E736673, "nsfs"},     {0x42465331, "befs"},
  };
  const uint32_t m = uint32_t(f_type);
  for (const auto& k : kMagics)
    if (k.magic == m) return k.name;
  return fmt::format("unknown(0x{:x})", m);
}

std::string filesystem_id(const std::string& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return "";
  return fmt::format("{}:{}", major(st.st_dev), minor(st.st_dev));
}

nlohmann::json probe_storage(const StorageOptions& o) {
  nlohmann::json j;
  j["dir"] = o.dir;
  auto fail = [&](const std::string& why) {
    j["valid"] = false;
    j["error"] = "[probe] storage " + o.dir + ": " + why;
    return j;
  };
  struct stat st;
  if (o.dir.empty()) return fail("no directory given");
  if (::stat(o.dir.c_str(), &st) != 0) return fail(errno_str());
  if (!S_ISDIR(st.st_mode)) return fail("not a directory");
  struct statfs fs;
  if (::statfs(o.dir.c_str(), &fs) != 0) return fail("statfs failed: " + errno_str());
  j["filesystem"] = filesystem_name(int64_t(fs.f_type));
  const uint64_t free_bytes = uint64_t(fs.f_bavail) * uint64_t(fs.f_bsize);
  j["free_bytes"] = free_bytes;

  size_t want = o.seq_bytes > 0 ? o.seq_bytes : (o.quick ? 64 : 512) * kStorageMiB;
  want = (want + kPage - 1) / kPage * kPage;
  // Leave three quarters of the free space alone: the probe must not be what
  // fills a disk.
  const size_t file_bytes = std::min<uint64_t>(want, free_bytes / 4 / kPage * kPage);
  if (file_bytes < std::min(want, kMinFileBytes))
    return fail(fmt::format("only {} bytes free, too little to probe", free_bytes));
  j["file_bytes"] = file_bytes;

  Status s = run_probe(o, file_bytes, j);
  j["valid"] = s.is_ok();
  if (!s.is_ok()) j["error"] = "[probe] storage: " + s.message();
  return j;
}

std::string storage_table(const nlohmann::json& storage) {
  if (!storage.is_array()) return one_table(storage);
  std::string out;
  for (const auto& s : storage) out += one_table(s);
  return out;
}

}  // namespace crucible::profile
