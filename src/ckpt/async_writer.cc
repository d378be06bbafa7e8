#include "ckpt/async_writer.h"

#include <pthread.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>

#include "core/check.h"
#include "core/clock.h"
#include "core/threads.h"
#include "core/trace.h"

namespace crucible::ckpt {

AsyncCheckpointWriter::AsyncCheckpointWriter(std::string ckpt_dir, int keep, WriteFn write)
    : ckpt_dir_(std::move(ckpt_dir)),
      keep_(keep),
      write_(std::move(write)),
      thread_([this] { run(); }) {
  // Named so it can be told apart in top -H, gdb and perf.
  pthread_setname_np(thread_.native_handle(), "crucible-ckpt");
}

AsyncCheckpointWriter::~AsyncCheckpointWriter() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return state_ != State::kWriting; });
    stop_ = true;
    // The owner did not wait() for it; a failure must still be seen.
    if (state_ == State::kDone && !last_.status) {
      std::fprintf(stderr, "%s\n", last_.status.message().c_str());
      std::fflush(stderr);
    }
  }
  cv_.notify_all();
  thread_.join();
}

AsyncCheckpointWriter::Outcome AsyncCheckpointWriter::wait() {
  Stopwatch sw;
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return state_ != State::kWriting; });
  Outcome out;
  if (state_ == State::kDone) {
    out = std::move(last_);
    last_ = Outcome{};
    state_ = State::kIdle;
  }
  out.waited_s = sw.elapsed_s();
  return out;
}

Snapshot& AsyncCheckpointWriter::buffer() {
  CRUCIBLE_CHECK(!busy(), "[ckpt] the snapshot buffer is not touched while a save is in flight");
  return buffer_;
}

void AsyncCheckpointWriter::start() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    CRUCIBLE_CHECK(state_ == State::kIdle,
                   "[ckpt] start() follows the wait() that reported the previous save");
    state_ = State::kWriting;
    last_ = Outcome{};
    last_.had_save = true;
    last_.step = buffer_.state.step;
  }
  cv_.notify_all();
}

bool AsyncCheckpointWriter::busy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_ == State::kWriting;
}

void AsyncCheckpointWriter::run() {
  block_stop_signals_in_this_thread();
  trace::set_thread_name("checkpoint writer");
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || state_ == State::kWriting; });
      if (state_ != State::kWriting) return;  // stop_, and nothing left to write
    }
    // Unlocked: the owner does not touch buffer_ while kWriting.
    Stopwatch sw;
    Status st;
    {
      trace::Scope scope("checkpoint write", "ckpt");  // inside the trace window only
      st = write_(ckpt_dir_, buffer_, keep_);
    }
    if (!st) {
      // The error alone does not say where a resume would start: name it.
      auto found = find_latest_valid(ckpt_dir_);
      std::string where = "; no valid earlier checkpoint exists either";
      if (found)
        where = "; latest still names " + std::filesystem::path(found->dir).filename().string();
      else if (found.status().code() == Code::kNotFound)
        where = "; no earlier checkpoint exists";
      st = Status::io(st.message() + where);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      last_.status = std::move(st);
      last_.write_s = sw.elapsed_s();
      state_ = State::kDone;
    }
    cv_.notify_all();
  }
}

}  // namespace crucible::ckpt
