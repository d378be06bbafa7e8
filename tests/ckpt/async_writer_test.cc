// AsyncCheckpointWriter: a background save writes exactly what a synchronous
// one does, start() returns while the write is still going, each save is
// reported once, failures carry where a resume would start, the destructor
// finishes the save in flight, and the snapshot buffer is reused. Saves that
// must be observed mid-write go through a stand-in write function held at a
// gate (no sleeps). Real files under a fresh temp dir.
#include "ckpt/async_writer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <thread>

#include "ckpt/checkpoint.h"
#include "support/files.h"

namespace crucible {
namespace {
namespace fs = std::filesystem;
using ckpt::AsyncCheckpointWriter;

// A hand-made snapshot of two parameters (136 floats, ~0.5 KB a buffer) whose
// values depend on the step. Fills `into` in place, as take_snapshot does.
void fill_snapshot(int64_t step, ckpt::Snapshot& into) {
  into.state = ckpt::CheckpointState{};
  into.state.step = step;
  into.state.config = {{"name", "async"}};
  into.state.loader = {{"epoch", 0}, {"sample", step * 8}};
  into.state.rng = {{"seed", 7}};
  into.specs.clear();
  into.specs.push_back(nn::ParamSpec{"transformer.wte.weight", Shape{16, 8}, 0, 128, false, nn::Init::zeros, 0.0f, false, Shape{16, 8}, {}});
  into.specs.push_back(nn::ParamSpec{"transformer.ln_f.bias", Shape{8}, 128, 8, false, nn::Init::zeros, 0.0f, false, Shape{8}, {}});
  const size_t n = 136;
  into.params.resize(n);
  into.moment_ranges = {{0, n}};
  into.exp_avg.resize(n);
  into.exp_avg_sq.resize(n);
  for (size_t i = 0; i < n; ++i) {
    into.params[i] = float(step) + 0.001f * float(i);
    into.exp_avg[i] = -0.5f * float(i);
    into.exp_avg_sq[i] = 0.25f * float(i + step);
  }
  into.adam_steps = step;
}

ckpt::Snapshot snapshot_at(int64_t step) {
  ckpt::Snapshot s;
  fill_snapshot(step, s);
  return s;
}

// Holds stand-in writes until opened: entered() tells that a write reached it.
// A write waits at most 10 s, so a writer that wrongly writes on the caller's
// thread fails the test instead of hanging it.
class Gate {
 public:
  AsyncCheckpointWriter::WriteFn write_fn() {
    return [this](const std::string& dir, const ckpt::Snapshot& snap, int keep) {
      std::unique_lock<std::mutex> lock(mu_);
      entered_ = true;
      cv_.notify_all();
      if (!cv_.wait_for(lock, std::chrono::seconds(10), [&] { return open_; })) timed_out_ = true;
      lock.unlock();
      return ckpt::write_checkpoint(dir, snap, keep);
    };
  }
  void wait_entered() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return entered_; });
  }
  void open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  bool timed_out() {
    std::lock_guard<std::mutex> lock(mu_);
    return timed_out_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool entered_ = false, open_ = false, timed_out_ = false;
};

class AsyncWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_ = std::make_unique<testutil::TempDir>("async_" + testutil::current_test_name());
    ckpt_ = (fs::path(tmp_->path()) / "ckpt").string();
  }
  void TearDown() override { tmp_.reset(); }
  std::string step_dir(int64_t step, const std::string& ckpt) const {
    return ckpt + "/" + ckpt::step_dir_name(step);
  }
  std::string step_dir(int64_t step) const { return step_dir(step, ckpt_); }
  // Saves through the writer and returns the outcome wait() reports.
  AsyncCheckpointWriter::Outcome save(AsyncCheckpointWriter& w, int64_t step) {
    AsyncCheckpointWriter::Outcome before = w.wait();
    EXPECT_FALSE(before.had_save) << "an earlier save was not reported";
    fill_snapshot(step, w.buffer());
    w.start();
    return w.wait();
  }

  std::unique_ptr<testutil::TempDir> tmp_;
  std::string ckpt_;
};

// The manifest records its time of writing to the second; everything else
// must be the same bytes.
nlohmann::json manifest_without_time(const std::string& dir) {
  auto m = nlohmann::json::parse(testutil::read_file(dir + "/manifest.json"));
  m.erase("created");
  m.erase(ckpt::kManifestChecksumKey);
  return m;
}

TEST_F(AsyncWriterTest, WritesTheSameCheckpointAsASynchronousWrite) {
  AsyncCheckpointWriter w(ckpt_, 2);
  auto out = save(w, 12);
  ASSERT_TRUE(out.had_save);
  ASSERT_TRUE(out.status) << out.status.message();
  const std::string sync_ckpt = tmp_->path() + "/sync";
  ASSERT_TRUE(ckpt::write_checkpoint(sync_ckpt, snapshot_at(12), 2));

  const std::string a = step_dir(12), b = step_dir(12, sync_ckpt);
  EXPECT_TRUE(ckpt::verify_checkpoint(a));
  for (const char* f : {"model.safetensors", "optimizer.safetensors"})
    EXPECT_EQ(testutil::read_file(a + "/" + f), testutil::read_file(b + "/" + f)) << f;
  auto ma = nlohmann::json::parse(testutil::read_file(a + "/manifest.json"));
  auto mb = nlohmann::json::parse(testutil::read_file(b + "/manifest.json"));
  if (ma["created"] == mb["created"])
    EXPECT_EQ(testutil::read_file(a + "/manifest.json"), testutil::read_file(b + "/manifest.json"));
  else
    EXPECT_EQ(manifest_without_time(a), manifest_without_time(b));
  EXPECT_EQ(testutil::read_file(ckpt_ + "/latest"), "step_0000012\n");
}

TEST_F(AsyncWriterTest, StartReturnsWhileTheWriteIsStillGoing) {
  Gate gate;
  AsyncCheckpointWriter w(ckpt_, 2, gate.write_fn());
  fill_snapshot(5, w.buffer());
  w.start();
  // Reached only because start() returned while the write is held at the gate.
  gate.wait_entered();
  EXPECT_TRUE(w.busy());
  EXPECT_FALSE(fs::exists(step_dir(5)));
  gate.open();
  auto out = w.wait();
  EXPECT_FALSE(gate.timed_out()) << "start() wrote on the caller's thread";
  EXPECT_FALSE(w.busy());
  ASSERT_TRUE(out.had_save);
  EXPECT_EQ(out.step, 5);
  ASSERT_TRUE(out.status) << out.status.message();
  EXPECT_TRUE(ckpt::verify_checkpoint(step_dir(5)));
  EXPECT_GE(out.waited_s, 0.0);
  EXPECT_GT(out.write_s, 0.0);
}

TEST_F(AsyncWriterTest, WaitReportsEachSaveOnceWithItsStep) {
  AsyncCheckpointWriter w(ckpt_, 3);
  auto none = w.wait();
  EXPECT_FALSE(none.had_save);
  EXPECT_TRUE(none.status);
  for (int64_t step : {10, 20, 30}) {
    fill_snapshot(step, w.buffer());
    w.start();
    auto out = w.wait();
    ASSERT_TRUE(out.had_save) << step;
    EXPECT_EQ(out.step, step);
    EXPECT_TRUE(out.status) << out.status.message();
    auto again = w.wait();
    EXPECT_FALSE(again.had_save) << step;
    EXPECT_EQ(again.step, 0);
    EXPECT_TRUE(again.status);
    auto found = ckpt::find_latest_valid(ckpt_);
    ASSERT_TRUE(found) << found.status().message();
    EXPECT_EQ(found->step, step);
  }
}

TEST_F(AsyncWriterTest, AWriteFaultIsReportedWithWhereAResumeWouldStart) {
  AsyncCheckpointWriter w(ckpt_, 3);
  ckpt::inject_checkpoint_write_fault(5, "model.safetensors");
  auto first = save(w, 5);
  ASSERT_TRUE(first.had_save);
  EXPECT_EQ(first.status.code(), Code::kIo);
  EXPECT_EQ(first.status.message(),
            "[ckpt] writing step_0000005/model.safetensors: injected write error (fault.inject)"
            "; no earlier checkpoint exists");

  ASSERT_TRUE(save(w, 10).status);
  ckpt::inject_checkpoint_write_fault(20, "optimizer.safetensors");
  auto out = save(w, 20);
  ASSERT_TRUE(out.had_save);
  EXPECT_EQ(out.step, 20);
  EXPECT_EQ(out.status.code(), Code::kIo);
  EXPECT_EQ(out.status.message(),
            "[ckpt] writing step_0000020/optimizer.safetensors: injected write error "
            "(fault.inject); latest still names step_0000010");
  EXPECT_FALSE(fs::exists(step_dir(20)));
  EXPECT_FALSE(fs::exists(step_dir(20) + ".tmp"));
  EXPECT_EQ(testutil::read_file(ckpt_ + "/latest"), "step_0000010\n");
  EXPECT_TRUE(ckpt::verify_checkpoint(step_dir(10)));
  // The writer carries on after a failure.
  auto retry = save(w, 20);
  EXPECT_TRUE(retry.status) << retry.status.message();
  EXPECT_TRUE(ckpt::verify_checkpoint(step_dir(20)));
}

TEST_F(AsyncWriterTest, DestructorFinishesTheSaveInFlight) {
  Gate gate;
  auto w = std::make_unique<AsyncCheckpointWriter>(ckpt_, 2, gate.write_fn());
  fill_snapshot(7, w->buffer());
  w->start();
  gate.wait_entered();  // the save is in flight, unreported
  // Opened from another thread: the destructor below blocks until the save ends.
  std::thread opener([&] { gate.open(); });
  w.reset();
  opener.join();
  EXPECT_FALSE(gate.timed_out());
  EXPECT_TRUE(ckpt::verify_checkpoint(step_dir(7)));
  EXPECT_EQ(testutil::read_file(ckpt_ + "/latest"), "step_0000007\n");
}

TEST_F(AsyncWriterTest, TheSnapshotBufferIsReusedAcrossSaves) {
  AsyncCheckpointWriter w(ckpt_, 1);
  ASSERT_TRUE(save(w, 1).status);
  const float* params = w.buffer().params.data();
  const float* exp_avg = w.buffer().exp_avg.data();
  for (int64_t step = 2; step <= 4; ++step) {
    ASSERT_TRUE(save(w, step).status);
    EXPECT_EQ(w.buffer().params.data(), params) << step;
    EXPECT_EQ(w.buffer().exp_avg.data(), exp_avg) << step;
  }
  auto found = ckpt::find_latest_valid(ckpt_);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->step, 4);
}

TEST(AsyncWriterDeathTest, StartingWithoutReportingThePreviousSaveAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // A stand-in that touches no file: the aborting child leaves nothing behind.
  auto no_write = [](const std::string&, const ckpt::Snapshot&, int) { return Status::ok(); };
  EXPECT_DEATH(
      {
        AsyncCheckpointWriter w("/nonexistent/ckpt", 1, no_write);
        fill_snapshot(1, w.buffer());
        w.start();
        w.start();
      },
      "start\\(\\) follows the wait\\(\\) that reported the previous save");
}

}  // namespace
}  // namespace crucible
