// DirLock: one owner for a directory (a run, a curation output, a dataset
// being built), decided before anything is written into it. An flock on a
// lock file, released by the kernel when its holder dies, whatever the cause
// (so a rerun after a crash is never refused). The holder records who it is
// (role, pid, host, since) in the file; a refusal names it. flock is per open
// file: two DirLocks in one process on one file exclude each other too.
// Not thread-safe; one object per lock held, released on destruction.
#pragma once
#include <functional>
#include <string>

#include "core/status.h"

namespace crucible {

class DirLock {
 public:
  DirLock() = default;
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;
  ~DirLock();

  // Creates dir if needed (created_dir() tells), then locks dir/file. Held by
  // another: waits up to wait_s (0: refuses at once), calling on_wait once
  // with the holder's description first. The refusal (invalid) reads
  // "[lock] DIR is in use by crucible train (pid 41 on host, since ...); HINT".
  Status acquire(const std::string& dir, const std::string& file, const std::string& role,
                 double wait_s, const std::string& hint,
                 const std::function<void(const std::string& holder)>& on_wait = nullptr);
  bool held() const { return fd_ >= 0; }
  bool created_dir() const { return created_dir_; }
  void release();

 private:
  int fd_ = -1;
  bool created_dir_ = false;
};

}  // namespace crucible
