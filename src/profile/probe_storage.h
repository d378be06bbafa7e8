// Storage probe: what checkpoints (large sequential writes made durable) and
// the data loader (sequential and random reads of data not in the page cache)
// will see on the file system holding a directory.
//
// It writes one temporary file `<dir>/.crucible-probe-<pid>` (`-<n>` appended
// for the n-th later call in one process; created exclusively, removed on
// every path out, errors included), reads it back
// sequentially and at random, and verifies every byte read against the
// deterministic pattern it wrote. Reads are cold: O_DIRECT where the file
// system supports it, else posix_fadvise(DONTNEED) drops the file's cached
// pages first (tmpfs keeps them: there the numbers are memory's, which is the
// truth for tmpfs). Only the I/O calls are timed, not pattern generation or
// verification.
//
// probe_storage() returns one object of probe.json's "storage" list:
//   dir               the directory probed, as given
//   filesystem        file system type from statfs f_type: ext4 (also ext2/3),
//                     xfs, btrfs, tmpfs, overlay, nfs, zfs, lustre, fuse, ...,
//                     else "unknown(0x<magic>)"
//   free_bytes        bytes available to this user (f_bavail x f_bsize), before the probe
//   file_bytes        size of the probe file (seq_bytes, shrunk to a quarter of
//                     free space when that is less)
//   seq_write_gbs     file_bytes / (write() in 4 MiB blocks + fsync), GB/s (1e9 B/s)
//   seq_read_gbs      file_bytes / time of the 4 MiB reads, cold, GB/s
//   direct_io         true when the reads used O_DIRECT
//   rand_read_4k_us   {"p50", "p99", "mean"}: latency of single 4 KiB reads at
//                     random 4 KiB-aligned offsets (distinct pages while the
//                     file has enough; readahead off), cold, microseconds
//   rand_reads        how many random reads were timed
//   valid             true when every byte read matched what was written
//   error             only on failure: the first I/O error or mismatch (the
//                     members measured before it are still present)
// A missing, non-directory or unwritable dir gives {"dir", "valid": false, "error"}.
//
// Thread-safe: concurrent calls use distinct files and share only a
// read-only pattern block.
#pragma once
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"

namespace crucible::profile {

struct StorageOptions {
  std::string dir;
  bool quick = false;
  size_t seq_bytes = 0;  // 0: 512 MiB, quick: 64 MiB; rounded up to whole 4 KiB pages
  int random_reads = 0;  // 0: 4000, quick: 500
};

nlohmann::json probe_storage(const StorageOptions& options);

// A few aligned lines for the terminal, one block per probed directory.
std::string storage_table(const nlohmann::json& storage);

// Identifies the file system (device) holding `dir` as "major:minor" of its
// st_dev, so two directories on one file system are probed once. "" when
// `dir` cannot be stat'ed.
std::string filesystem_id(const std::string& dir);

// statfs f_type -> name, as in "filesystem".
std::string filesystem_name(int64_t f_type);

// The probe file's contents: every 4 KiB page starts with its file offset
// (a native u64) and continues with a fixed pseudo-random 4 MiB block, so
// each page is unique (no dedup or compression shortcut) and a page read from
// the wrong place is caught. `offset` and `n` are multiples of 4096.
void fill_probe_pattern(uint64_t offset, void* buf, size_t n);
// Verifies bytes read at `offset` against the pattern; Status::corrupt naming
// the file offset of the first wrong byte.
Status check_probe_pattern(uint64_t offset, const void* buf, size_t n);

}  // namespace crucible::profile
