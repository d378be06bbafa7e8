#include "runtime/launcher_stderr.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

#include "core/file_io.h"

namespace crucible::runtime {

namespace {

// Open MPI's box rule: a line of dashes (74 of them).
bool is_rule(std::string_view line) {
  return line.size() >= 20 && line.find_first_not_of('-') == std::string_view::npos;
}

// The boxes mpirun prints around a rank's non-zero exit code.
bool is_exit_banner(const std::string& box) {
  return box.find("terminated normally, but") != std::string::npos ||
         box.find("exited with non-zero status, thus causing") != std::string::npos;
}

void write_all(const std::string& text) {
  for (size_t at = 0; at < text.size();) {
    const ssize_t n = ::write(STDERR_FILENO, text.data() + at, text.size() - at);
    if (n <= 0) return;  // stderr gone: nothing left to tell
    at += size_t(n);
  }
}

}  // namespace

std::string MpirunBannerFilter::feed(std::string_view chunk) {
  std::string out;
  partial_.append(chunk);
  size_t from = 0;
  for (size_t nl; (nl = partial_.find('\n', from)) != std::string::npos; from = nl + 1) {
    const std::string_view line(partial_.data() + from, nl - from);
    const std::string_view with_newline(partial_.data() + from, nl + 1 - from);
    if (!in_box_) {
      if (is_rule(line)) {
        in_box_ = true;
        box_.assign(with_newline);
      } else {
        out.append(with_newline);
      }
      continue;
    }
    box_.append(with_newline);
    if (!is_rule(line)) continue;
    in_box_ = false;  // the closing rule
    if (!is_exit_banner(box_)) out += box_;
    box_.clear();
  }
  partial_.erase(0, from);
  return out;
}

std::string MpirunBannerFilter::finish() {
  std::string out = box_ + partial_;
  box_.clear(), partial_.clear(), in_box_ = false;
  return out;
}

Status StderrRelay::open() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return Status::io("[launch] pipe: " + errno_str());
  read_fd_ = fds[0], write_fd_ = fds[1];
  return Status::ok();
}

void StderrRelay::start() {
  if (read_fd_ < 0) return;
  ::close(write_fd_);
  write_fd_ = -1;
  thread_ = std::thread([this] { copy(); });
}

void StderrRelay::copy() {
  MpirunBannerFilter filter;
  char buf[4096];
  std::chrono::steady_clock::time_point give_up{};
  for (;;) {
    if (stop_.load()) {  // the job is over: a writer that outlives it by 2 s is not waited for
      const auto now = std::chrono::steady_clock::now();
      if (give_up == std::chrono::steady_clock::time_point{})
        give_up = now + std::chrono::seconds(2);
      if (now >= give_up) break;
    }
    pollfd p{read_fd_, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const ssize_t n = ::read(read_fd_, buf, sizeof buf);
    if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) break;  // every writer gone
    if (n > 0) write_all(filter.feed(std::string_view(buf, size_t(n))));
  }
  write_all(filter.finish());
}

StderrRelay::~StderrRelay() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  if (read_fd_ >= 0) ::close(read_fd_);
  if (write_fd_ >= 0) ::close(write_fd_);
}

}  // namespace crucible::runtime
