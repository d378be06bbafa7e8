// Checked files: intermediates whose every part carries a checksum, so a stage
// verifies what an earlier stage (or an earlier, interrupted run) left on disk
// before it uses it, instead of finding corruption later in its output.
//
// Layout (little-endian; docs/formats.md, "Checked files"):
//   [section 0][section 1]...[section n-1]
//   table: n x {u64 offset, u64 length, u64 xxh3_64(section bytes)}
//   u64 n, u64 xxh3_64(table + n), 8 bytes magic "CRUCHK01"
// A reader checks the trailer and the table when it opens the file, and each
// section's hash when it reads that section, so a stage can read one section
// (one partition of a sorted key file) without reading the others.
// Files are written through AtomicFile (temporary file, fsync, rename): a file
// with the final name is whole; a crash leaves at most a temporary.
// Errors: Status::corrupt naming the file and what does not match; Status::io
// for OS errors. Writer and Reader are not thread-safe; use one per thread.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/file_io.h"
#include "core/status.h"

namespace crucible {

class CheckedWriter {
 public:
  Status open(const std::string& path);
  // Appends bytes to the current section.
  Status append(const void* data, size_t n);
  Status append(std::string_view s) { return append(s.data(), s.size()); }
  // Ends the current section (an empty one is allowed) and starts the next.
  void end_section();
  // Ends the last section, writes the table and commits the file.
  Status commit();

 private:
  struct Entry {
    uint64_t offset, length, hash;
  };
  AtomicFile file_;
  std::vector<Entry> table_;
  std::vector<char> pending_;  // current section
  uint64_t offset_ = 0;
  bool open_ = false;
  Status write_error_;  // the first failed write (with the file and the OS error)
};

class CheckedReader {
 public:
  CheckedReader() = default;
  ~CheckedReader();
  CheckedReader(CheckedReader&& o) noexcept;
  CheckedReader& operator=(CheckedReader&& o) noexcept;
  CheckedReader(const CheckedReader&) = delete;
  CheckedReader& operator=(const CheckedReader&) = delete;

  // Opens and checks the trailer and section table.
  static Result<CheckedReader> open(const std::string& path);
  size_t sections() const { return table_.size(); }
  uint64_t section_size(size_t i) const { return table_[i].length; }
  // Reads section i into *out and checks its hash.
  Status read(size_t i, std::string* out) const;
  // Reads every section, checking each: the whole-file verification.
  Status verify_all() const;
  const std::string& path() const { return path_; }

 private:
  struct Entry {
    uint64_t offset, length, hash;
  };
  std::string path_;
  int fd_ = -1;
  std::vector<Entry> table_;
};

// One-section convenience forms.
Status write_checked(const std::string& path, std::string_view payload);
Result<std::string> read_checked(const std::string& path);

}  // namespace crucible
