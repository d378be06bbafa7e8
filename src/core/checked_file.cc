#include "core/checked_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cstring>

#include "core/hash.h"

namespace crucible {
namespace {

constexpr char kMagic[8] = {'C', 'R', 'U', 'C', 'H', 'K', '0', '1'};
constexpr size_t kTrailer = 8 + 8 + 8;  // n, table hash, magic

Status pread_all(int fd, void* dst, size_t n, uint64_t offset, const std::string& path) {
  auto got = pread_full(fd, dst, n, offset, path);
  if (!got) return got.status();
  if (*got < n) return Status::corrupt(path + ": truncated (unexpected end of file)");
  return Status::ok();
}

}  // namespace

Status CheckedWriter::open(const std::string& path) {
  table_.clear();
  pending_.clear();
  offset_ = 0;
  write_error_ = Status::ok();
  CRUCIBLE_RETURN_IF_ERROR(file_.open(path));
  open_ = true;
  return Status::ok();
}

Status CheckedWriter::append(const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  pending_.insert(pending_.end(), p, p + n);
  return Status::ok();
}

void CheckedWriter::end_section() {
  // Sections are buffered whole (they are bounded by the chunk size) and
  // written when ended, so the hash is of exactly the bytes written.
  Entry e{offset_, pending_.size(), XXH3_64bits(pending_.data(), pending_.size())};
  Status s = file_.write(pending_.data(), pending_.size());
  if (!s.is_ok() && open_) {  // commit() reports it, with the OS's reason
    open_ = false;
    write_error_ = s;
  }
  offset_ += pending_.size();
  table_.push_back(e);
  pending_.clear();
}

Status CheckedWriter::commit() {
  end_section();
  if (!open_) {
    file_.abandon();  // nothing half-written stays behind
    return write_error_.is_ok() ? Status::io("cannot write " + file_.path()) : write_error_;
  }
  std::vector<uint64_t> words;
  for (const auto& e : table_) words.insert(words.end(), {e.offset, e.length, e.hash});
  words.push_back(table_.size());
  uint64_t table_hash = XXH3_64bits(words.data(), words.size() * 8);
  words.push_back(table_hash);
  CRUCIBLE_RETURN_IF_ERROR(file_.write(words.data(), words.size() * 8));
  CRUCIBLE_RETURN_IF_ERROR(file_.write(kMagic, sizeof kMagic));
  open_ = false;
  return file_.commit();
}

CheckedReader::~CheckedReader() {
  if (fd_ >= 0) ::close(fd_);
}

CheckedReader::CheckedReader(CheckedReader&& o) noexcept
    : path_(std::move(o.path_)), fd_(o.fd_), table_(std::move(o.table_)) {
  o.fd_ = -1;
}

CheckedReader& CheckedReader::operator=(CheckedReader&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(o.path_);
    fd_ = o.fd_;
    table_ = std::move(o.table_);
    o.fd_ = -1;
  }
  return *this;
}

Result<CheckedReader> CheckedReader::open(const std::string& path) {
  CheckedReader r;
  r.path_ = path;
  r.fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (r.fd_ < 0) {
    if (errno == ENOENT) return Status::not_found(path + " does not exist");
    return Status::io("cannot open " + path + ": " + errno_str());
  }
  struct stat st{};
  if (::fstat(r.fd_, &st) != 0) return Status::io("cannot stat " + path + ": " + errno_str());
  const uint64_t size = uint64_t(st.st_size);
  if (size < kTrailer) return Status::corrupt(path + ": too short for a checked file");
  char trailer[kTrailer];
  CRUCIBLE_RETURN_IF_ERROR(pread_all(r.fd_, trailer, kTrailer, size - kTrailer, path));
  if (std::memcmp(trailer + 16, kMagic, 8) != 0)
    return Status::corrupt(path + ": no checked-file trailer (truncated or not written by crucible)");
  uint64_t n = 0, table_hash = 0;
  std::memcpy(&n, trailer, 8);
  std::memcpy(&table_hash, trailer + 8, 8);
  if (n > (size - kTrailer) / 24) return Status::corrupt(path + ": section table out of range");
  std::vector<uint64_t> words(n * 3 + 1);
  const uint64_t table_at = size - kTrailer - n * 24;
  CRUCIBLE_RETURN_IF_ERROR(pread_all(r.fd_, words.data(), n * 24, table_at, path));
  words[n * 3] = n;
  uint64_t got = XXH3_64bits(words.data(), words.size() * 8);
  if (got != table_hash)
    return Status::corrupt(path + ": section table checksum mismatch (stored " + hex64(table_hash) +
                           ", computed " + hex64(got) + ")");
  for (uint64_t i = 0; i < n; ++i) {
    Entry e{words[3 * i], words[3 * i + 1], words[3 * i + 2]};
    if (e.offset > table_at || e.length > table_at - e.offset)
      return Status::corrupt(path + ": section " + std::to_string(i) + " out of range");
    r.table_.push_back(e);
  }
  return r;
}

Status CheckedReader::read(size_t i, std::string* out) const {
  if (i >= table_.size())
    return Status::corrupt(path_ + ": has " + std::to_string(table_.size()) +
                           " sections, section " + std::to_string(i) + " was asked for");
  const Entry& e = table_[i];
  out->resize(e.length);
  CRUCIBLE_RETURN_IF_ERROR(pread_all(fd_, out->data(), e.length, e.offset, path_));
  uint64_t got = XXH3_64bits(out->data(), out->size());
  if (got != e.hash)
    return Status::corrupt(path_ + ": checksum mismatch in section " + std::to_string(i) +
                           " (stored " + hex64(e.hash) + ", computed " + hex64(got) + ")");
  return Status::ok();
}

Status CheckedReader::verify_all() const {
  std::string buf;
  for (size_t i = 0; i < table_.size(); ++i) CRUCIBLE_RETURN_IF_ERROR(read(i, &buf));
  return Status::ok();
}

Status write_checked(const std::string& path, std::string_view payload) {
  CheckedWriter w;
  CRUCIBLE_RETURN_IF_ERROR(w.open(path));
  CRUCIBLE_RETURN_IF_ERROR(w.append(payload));
  return w.commit();
}

Result<std::string> read_checked(const std::string& path) {
  auto r = CheckedReader::open(path);
  if (!r) return r.status();
  if (r->sections() != 1)
    return Status::corrupt(path + ": expected 1 section, found " + std::to_string(r->sections()));
  std::string out;
  CRUCIBLE_RETURN_IF_ERROR(r->read(0, &out));
  return out;
}

}  // namespace crucible
