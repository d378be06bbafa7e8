// Durable file writes: the one way crucible puts a file on disk.
//
// AtomicFile streams bytes into a temporary file next to the target; commit()
// fsyncs it, renames it over the target and fsyncs the directory, so a reader
// (or a crash) sees either the old file or the whole new one, never a torn one.
// An AtomicFile destroyed without commit() removes its temporary file. Errors
// are Status::io naming the file and the OS error. open() first checks the
// target with check_output_path (core/output_path.h): a directory, device,
// FIFO, socket or symbolic link, a missing directory, or (outside the
// checkpoint writer) a path inside a run's checkpoint directory is
// Status::invalid and nothing is created. Not thread-safe.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "core/output_path.h"
#include "core/status.h"

namespace crucible {

class AtomicFile {
 public:
  AtomicFile() = default;
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  Status open(const std::string& path, OutputScope scope = OutputScope::kAnywhere);
  Status write(const void* data, size_t n);
  // Writes at an absolute offset (e.g. a header completed after the payload).
  Status pwrite(const void* data, size_t n, size_t offset);
  Status commit();
  void abandon();  // removes the temporary file
  const std::string& path() const { return path_; }

 private:
  std::string path_, tmp_;
  int fd_ = -1;
};

// The whole file from parts, atomically (AtomicFile in one call).
Status write_file_atomic(const std::string& path, const std::vector<const void*>& parts,
                         const std::vector<size_t>& sizes,
                         OutputScope scope = OutputScope::kAnywhere);
Status write_file_atomic(const std::string& path, const std::string& text,
                         OutputScope scope = OutputScope::kAnywhere);

// The whole file (a directory or an unreadable file is Status::invalid naming it).
Result<std::string> read_file(const std::string& path);

// fsync of a directory, making renames and creations inside it durable.
Status fsync_dir(const std::string& dir);
// The directory part of a path ("." for a bare name).
std::string dir_of(const std::string& path);
// strerror(errno), for messages.
std::string errno_str();
// Reads up to n bytes at `offset` (retrying short reads and EINTR); the count
// read, less than n only at end of file. Errors: Status::io naming `path`.
Result<size_t> pread_full(int fd, void* dst, size_t n, uint64_t offset, const std::string& path);

}  // namespace crucible
