#include "core/dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "core/clock.h"
#include "core/file_io.h"
#include "core/process.h"

namespace crucible {

namespace fs = std::filesystem;

DirLock::~DirLock() { release(); }

void DirLock::release() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

namespace {

// What the holder wrote (the file is rewritten whole on each acquire). A
// holder that has just taken the lock writes its line a moment later.
std::string holder_of(const std::string& path) {
  for (int tries = 0; tries < 20; ++tries) {
    auto text = read_file(path);
    std::string h = text ? *text : std::string();
    if (!h.empty() && h.back() == '\n') {
      h.pop_back();
      return h;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return "another process";
}

}  // namespace

Status DirLock::acquire(const std::string& dir, const std::string& file, const std::string& role,
                        double wait_s, const std::string& hint,
                        const std::function<void(const std::string&)>& on_wait) {
  release();
  std::error_code ec;
  created_dir_ = fs::create_directories(dir, ec);
  if (ec) return Status::invalid("[lock] cannot create " + dir + ": " + ec.message());
  const std::string path = dir + "/" + file;
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) return Status::invalid("[lock] cannot write " + path + ": " + errno_str());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
  bool told = false;
  while (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    if (std::chrono::steady_clock::now() >= deadline) {
      release();
      return Status::invalid("[lock] " + dir + " is in use by " + holder_of(path) + "; " + hint);
    }
    if (!told && on_wait) on_wait(holder_of(path));
    told = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const std::string me = role + " (pid " + std::to_string(::getpid()) + " on " + host_name() +
                         ", since " + wall_time("%Y-%m-%d %H:%M:%S", false) + ")\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, me.data(), me.size(), 0) != ssize_t(me.size())) {
    release();
    return Status::io("[lock] cannot write " + path + ": " + errno_str());
  }
  return Status::ok();
}

}  // namespace crucible
