// Training checkpoints: bit-identical round trip, the manifest, corruption and
// truncation detection with fallback to the previous checkpoint, pruning,
// stale .tmp sweeping, injected write faults, the read-back before publishing,
// injected corruption, and the crash window between the rename and the update
// of `latest`. Real files under a fresh temp dir.
#include "ckpt/checkpoint.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "ckpt/model_io.h"
#include "ckpt/safetensors.h"
#include "core/rng.h"
#include "nn/gpt.h"
#include "optim/adamw.h"
#include "support/files.h"

namespace crucible {
namespace {
namespace fs = std::filesystem;
using ckpt::CheckpointState;

const nn::GPTConfig kCfg{2, 2, 32, 64, 16};

// A tiny GPT and its AdamW, with non-zero moments after fake_steps().
struct Model {
  explicit Model(uint64_t seed, nn::GPTConfig cfg = kCfg)
      : gpt(cfg), opt(gpt.params(), optim::AdamWConfig{}) {
    gpt.init_weights(seed);
  }
  // AdamW steps on random gradients (padding between parameters stays zero).
  void fake_steps(int n, uint64_t seed) {
    nn::ParamRegistry& p = gpt.params();
    for (int i = 0; i < n; ++i) {
      Rng rng(seed, 17, uint64_t(i) << 32);
      for (const nn::ParamSpec& s : p.specs()) rng.fill_normal(p.grads() + s.offset, s.numel, 0, 1);
      opt.step(1e-3f);
    }
  }
  nn::GPT gpt;
  optim::AdamW opt;
};

CheckpointState state_at(int64_t step) {
  CheckpointState s;
  s.step = step;
  s.config = {{"model", {{"n_layer", 2}, {"n_embd", 32}}},
              {"optim", {{"lr", 3e-4}, {"betas", {0.9, 0.95}}}},
              {"name", "unit \"test\""}};
  s.loader = {{"epoch", 1}, {"sample", 123 + step}};
  s.rng = {{"seed", uint64_t(0xdeadbeefcafef00dull)}, {"position", step * 4}};
  s.world = {{"world_size", 1}, {"dp", 1}};
  return s;
}

std::string read_file(const fs::path& p) { return testutil::read_file(p.string()); }
void write_file(const fs::path& p, const std::string& b) { testutil::write_file(p.string(), b); }

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_ = std::make_unique<testutil::TempDir>("ckpt_" + testutil::current_test_name());
    dir_ = tmp_->path();
    ckpt_ = (dir_ / "ckpt").string();
  }
  void TearDown() override { tmp_.reset(); }

  Status save(const Model& m, int64_t step, int keep = 5) {
    return ckpt::write_checkpoint(ckpt_, ckpt::take_snapshot(state_at(step), m.gpt.params(), m.opt),
                                  keep);
  }
  std::string step_dir(int64_t step) const { return ckpt_ + "/" + ckpt::step_dir_name(step); }
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(ckpt_)) names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  }

  std::unique_ptr<testutil::TempDir> tmp_;
  fs::path dir_;
  std::string ckpt_;
};

bool same_floats(const float* a, const float* b, size_t n) {
  return std::memcmp(a, b, n * sizeof(float)) == 0;
}

TEST_F(CheckpointTest, RoundTripIsBitIdentical) {
  Model a(1);
  a.fake_steps(3, 5);
  ASSERT_TRUE(save(a, 3)) << "write failed";
  Model b(2);  // different weights, zero moments
  const size_t n = a.gpt.params().numel();
  ASSERT_FALSE(same_floats(a.gpt.params().values(), b.gpt.params().values(), n));
  auto state = ckpt::load_checkpoint(step_dir(3), b.gpt.params(), &b.opt);
  ASSERT_TRUE(state) << state.status().message();
  EXPECT_TRUE(same_floats(a.gpt.params().values(), b.gpt.params().values(), n));
  EXPECT_TRUE(same_floats(a.opt.m(), b.opt.m(), n));
  EXPECT_TRUE(same_floats(a.opt.v(), b.opt.v(), n));
  EXPECT_EQ(b.opt.steps_taken(), 3);
  CheckpointState want = state_at(3);
  EXPECT_EQ(state->step, 3);
  EXPECT_EQ(state->config, want.config);
  EXPECT_EQ(state->loader, want.loader);
  EXPECT_EQ(state->rng, want.rng);
  EXPECT_EQ(state->world, want.world);
  // Training on from either gives the same weights.
  a.fake_steps(1, 9);
  b.fake_steps(1, 9);
  EXPECT_TRUE(same_floats(a.gpt.params().values(), b.gpt.params().values(), n));
}

// Linear, not quadratic, in the tensors: a model of 20,000 small tensors
// (1,667 blocks of 12, and the embedding's and head's) checkpoints and loads
// back bit-identically in seconds (the manifest and headers were built by
// key lookups that scanned every key before: minutes). The bound is a guard.
TEST_F(CheckpointTest, TwentyThousandTensorsRoundTripInSeconds) {
  const nn::GPTConfig many{1667, 2, 8, 16, 4};
  Model a(1, many);
  ASSERT_GE(a.gpt.params().specs().size(), 20000u);
  a.fake_steps(1, 5);
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(save(a, 1));
  Model b(2, many);
  auto state = ckpt::load_checkpoint(step_dir(1), b.gpt.params(), &b.opt);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(state) << state.status().message();
  const size_t n = a.gpt.params().numel();
  EXPECT_TRUE(same_floats(a.gpt.params().values(), b.gpt.params().values(), n));
  EXPECT_TRUE(same_floats(a.opt.m(), b.opt.m(), n));
  EXPECT_TRUE(same_floats(a.opt.v(), b.opt.v(), n));
  EXPECT_LT(seconds, 20) << "a checkpoint of 20,000 tensors took " << seconds << " s";
}

TEST_F(CheckpointTest, SnapshotIsACopyTakenAtItsStep) {
  Model a(1);
  a.fake_steps(2, 5);
  ckpt::Snapshot snap = ckpt::take_snapshot(state_at(2), a.gpt.params(), a.opt);
  std::vector<float> at_snapshot(a.gpt.params().values(),
                                 a.gpt.params().values() + a.gpt.params().numel());
  a.fake_steps(2, 6);  // training goes on while the snapshot waits to be written
  ASSERT_TRUE(ckpt::write_checkpoint(ckpt_, snap, 2));
  Model b(2);
  ASSERT_TRUE(ckpt::load_checkpoint(step_dir(2), b.gpt.params(), &b.opt));
  EXPECT_TRUE(same_floats(at_snapshot.data(), b.gpt.params().values(), at_snapshot.size()));
  EXPECT_EQ(b.opt.steps_taken(), 2);
}

TEST_F(CheckpointTest, ManifestListsEveryFileWithSizeAndChecksum) {
  Model a(1);
  a.fake_steps(1, 5);
  ASSERT_TRUE(save(a, 20));
  EXPECT_EQ(read_file(fs::path(ckpt_) / "latest"), "step_0000020\n");
  auto m = nlohmann::json::parse(read_file(fs::path(step_dir(20)) / "manifest.json"));
  for (const char* key : {"format", "format_version", "step", "created", "config", "loader", "rng",
                          "world", "files", "manifest_xxh64"})
    EXPECT_TRUE(m.contains(key)) << "manifest lacks " << key;
  EXPECT_EQ(m["step"], 20);
  EXPECT_EQ(m["loader"], state_at(20).loader);
  EXPECT_EQ(m["config"], state_at(20).config);
  EXPECT_EQ(m["world"]["world_size"], 1);
  EXPECT_EQ(m["manifest_xxh64"].get<std::string>().size(), 16u);
  std::vector<std::string> names;
  for (const auto& f : m["files"]) {
    std::string name = f["name"];
    names.push_back(name);
    std::string bytes = read_file(fs::path(step_dir(20)) / name);
    EXPECT_EQ(f["bytes"].get<uint64_t>(), bytes.size()) << name;
    std::string hex = f["xxh64"];
    EXPECT_EQ(hex, ckpt::xxh64_hex(XXH64(bytes.data(), bytes.size(), 0))) << name;
    EXPECT_EQ(hex.find_first_not_of("0123456789abcdef"), std::string::npos) << hex;
    EXPECT_EQ(hex.size(), 16u);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"model.safetensors", "optimizer.safetensors"}));
  EXPECT_EQ(entries(), (std::vector<std::string>{"latest", "step_0000020"}));
}

TEST_F(CheckpointTest, WeightsAreHfGpt2Safetensors) {
  Model a(1);
  a.fake_steps(2, 5);
  ASSERT_TRUE(save(a, 2));
  auto model = ckpt::read_safetensors(step_dir(2) + "/model.safetensors");
  ASSERT_TRUE(model) << model.status().message();
  EXPECT_EQ(model->metadata.at("format"), "pt");
  EXPECT_EQ(model->tensors.size(), a.gpt.params().specs().size());
  for (const char* name :
       {"transformer.wte.weight", "transformer.wpe.weight", "transformer.h.0.attn.c_attn.weight",
        "transformer.h.1.mlp.c_proj.bias", "transformer.ln_f.weight"})
    EXPECT_NE(model->find(name), nullptr) << name;
  EXPECT_EQ(model->find("transformer.h.0.attn.c_attn.weight")->shape,
            (std::vector<int64_t>{32, 96}));
  const nn::ParamSpec* wte = a.gpt.params().find("transformer.wte.weight");
  EXPECT_TRUE(same_floats(model->find("transformer.wte.weight")->f32(),
                          a.gpt.params().values() + wte->offset, wte->numel));
  Model b(2);
  EXPECT_TRUE(ckpt::load_params(b.gpt.params(), step_dir(2) + "/model.safetensors"));

  auto opt = ckpt::read_safetensors(step_dir(2) + "/optimizer.safetensors");
  ASSERT_TRUE(opt) << opt.status().message();
  EXPECT_EQ(opt->metadata.at("adam_steps"), "2");
  EXPECT_EQ(opt->tensors.size(), 2 * a.gpt.params().specs().size());
  ASSERT_NE(opt->find("exp_avg_sq.transformer.wte.weight"), nullptr);
  EXPECT_TRUE(same_floats(opt->find("exp_avg_sq.transformer.wte.weight")->f32(),
                          a.opt.v() + wte->offset, wte->numel));
}

// ---- Damage to the newest checkpoint: detected, and the previous one is used ----

struct Damage {
  const char* file;
  enum Kind { kFlip, kTruncate, kDelete } kind;
  const char* expect;  // in the message
};

class CheckpointDamageTest : public CheckpointTest, public ::testing::WithParamInterface<Damage> {};

TEST_P(CheckpointDamageTest, IsDetectedAndThePreviousCheckpointIsUsed) {
  const Damage d = GetParam();
  Model a(1);
  a.fake_steps(1, 5);
  ASSERT_TRUE(save(a, 10));
  a.fake_steps(1, 6);
  ASSERT_TRUE(save(a, 20));
  ASSERT_TRUE(ckpt::verify_checkpoint(step_dir(20)));

  const fs::path victim = fs::path(step_dir(20)) / d.file;
  std::string bytes = read_file(victim);
  if (d.kind == Damage::kFlip) bytes[bytes.size() / 2] ^= 0x04;
  if (d.kind == Damage::kTruncate) bytes.resize(bytes.size() - 100);
  if (d.kind == Damage::kDelete)
    fs::remove(victim);
  else
    write_file(victim, bytes);

  const std::string label = std::string("step_0000020/") + d.file;
  Status st = ckpt::verify_checkpoint(step_dir(20));
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find(label), std::string::npos) << st.message();
  EXPECT_NE(st.message().find(d.expect), std::string::npos) << st.message();
  EXPECT_TRUE(st.message().starts_with("[ckpt] ")) << st.message();
  Model b(2);
  EXPECT_FALSE(ckpt::load_checkpoint(step_dir(20), b.gpt.params(), &b.opt));

  auto found = ckpt::find_latest_valid(ckpt_);
  ASSERT_TRUE(found) << found.status().message();
  EXPECT_EQ(found->step, 10);
  EXPECT_EQ(found->dir, step_dir(10));
  ASSERT_EQ(found->warnings.size(), 1u);
  EXPECT_NE(found->warnings[0].find(label), std::string::npos) << found->warnings[0];
}

INSTANTIATE_TEST_SUITE_P(
    Files, CheckpointDamageTest,
    ::testing::Values(Damage{"model.safetensors", Damage::kFlip, "checksum mismatch"},
                      Damage{"optimizer.safetensors", Damage::kFlip, "checksum mismatch"},
                      Damage{"manifest.json", Damage::kFlip, "manifest.json"},
                      Damage{"model.safetensors", Damage::kTruncate, "(truncated)"},
                      Damage{"optimizer.safetensors", Damage::kTruncate, "(truncated)"},
                      Damage{"manifest.json", Damage::kTruncate, "manifest.json"},
                      Damage{"model.safetensors", Damage::kDelete, "missing"},
                      Damage{"manifest.json", Damage::kDelete, "missing"}),
    [](const auto& info) {
      std::string name = info.param.file;
      name = name.substr(0, name.find('.'));
      return name + (info.param.kind == Damage::kFlip       ? "Flip"
                     : info.param.kind == Damage::kTruncate ? "Truncate"
                                                            : "Delete");
    });

TEST_F(CheckpointTest, EverySingleBitFlipInTheManifestIsDetected) {
  Model a(1);
  ASSERT_TRUE(save(a, 7));
  const fs::path manifest = fs::path(step_dir(7)) / "manifest.json";
  const std::string good = read_file(manifest);
  // Bytes are flipped in place: rewriting the file each time costs a flush.
  int fd = ::open(manifest.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  int undetected = 0;
  for (size_t i = 0; i < good.size(); ++i) {
    char bad = char(good[i] ^ (1 << (i % 8)));
    ASSERT_EQ(::pwrite(fd, &bad, 1, off_t(i)), 1);
    Status st = ckpt::verify_checkpoint(step_dir(7));
    if (st || st.message().find("step_0000007/manifest.json") == std::string::npos) {
      if (++undetected <= 3) ADD_FAILURE() << "flip at byte " << i << ": " << st.message();
    }
    ASSERT_EQ(::pwrite(fd, &good[i], 1, off_t(i)), 1);
  }
  ::close(fd);
  EXPECT_EQ(undetected, 0) << "of " << good.size() << " flips";
  EXPECT_TRUE(ckpt::verify_checkpoint(step_dir(7)));
}

TEST_F(CheckpointTest, ADirectoryRenamedToAnotherStepIsRejected) {
  Model a(1);
  ASSERT_TRUE(save(a, 10));
  fs::rename(step_dir(10), step_dir(11));
  Status st = ckpt::verify_checkpoint(step_dir(11));
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("step_0000011/manifest.json: records step 10"), std::string::npos)
      << st.message();
}

TEST_F(CheckpointTest, NoValidCheckpointIsCorruptNotNotFound) {
  Model a(1);
  ASSERT_TRUE(save(a, 10));
  fs::remove(fs::path(step_dir(10)) / "optimizer.safetensors");
  auto found = ckpt::find_latest_valid(ckpt_);
  ASSERT_FALSE(found);
  EXPECT_EQ(found.status().code(), Code::kCorrupt);
  EXPECT_NE(found.status().message().find("step_0000010/optimizer.safetensors"), std::string::npos)
      << found.status().message();
}

TEST_F(CheckpointTest, MissingOrEmptyDirectoryIsNotFound) {
  auto missing = ckpt::find_latest_valid(ckpt_);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  fs::create_directories(fs::path(ckpt_) / "step_0000005.tmp");  // an interrupted write
  fs::create_directories(fs::path(ckpt_) / "step_5");            // not the canonical name
  write_file(fs::path(ckpt_) / "latest", "step_0000005\n");
  auto empty = ckpt::find_latest_valid(ckpt_);
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.status().code(), Code::kNotFound) << empty.status().message();
}

// ---- Write sequence ----

TEST_F(CheckpointTest, KeepPrunesToTheNewest) {
  Model a(1);
  for (int step = 1; step <= 5; ++step) ASSERT_TRUE(save(a, step, /*keep=*/2));
  EXPECT_EQ(entries(), (std::vector<std::string>{"latest", "step_0000004", "step_0000005"}));
  EXPECT_EQ(read_file(fs::path(ckpt_) / "latest"), "step_0000005\n");
  EXPECT_TRUE(ckpt::verify_checkpoint(step_dir(4)));
  EXPECT_EQ(
      ckpt::write_checkpoint(ckpt_, ckpt::take_snapshot(state_at(6), a.gpt.params(), a.opt), 0)
          .code(),
      Code::kInvalidArgument);
}

TEST_F(CheckpointTest, StaleTmpDirectoriesAreRemovedOnTheNextWrite) {
  fs::create_directories(fs::path(ckpt_) / "step_0000007.tmp");
  write_file(fs::path(ckpt_) / "step_0000007.tmp" / "model.safetensors", "partial");
  fs::create_directories(fs::path(ckpt_) / "step_0000003.delete.tmp");
  write_file(fs::path(ckpt_) / "notes.txt", "the user's");
  Model a(1);
  ASSERT_TRUE(save(a, 8));
  EXPECT_EQ(entries(), (std::vector<std::string>{"latest", "notes.txt", "step_0000008"}));
}

TEST_F(CheckpointTest, ACompleteDirectoryNewerThanLatestIsFound) {
  Model a(1);
  ASSERT_TRUE(save(a, 10));
  ASSERT_TRUE(save(a, 20));
  write_file(fs::path(ckpt_) / "latest", "step_0000010\n");  // crash before the update
  auto found = ckpt::find_latest_valid(ckpt_);
  ASSERT_TRUE(found) << found.status().message();
  EXPECT_EQ(found->step, 20);
  EXPECT_TRUE(found->warnings.empty());
}

TEST_F(CheckpointTest, RewritingAStepReplacesItAndDropsNewerTimelines) {
  Model a(1);
  for (int step : {10, 20, 30}) ASSERT_TRUE(save(a, step));
  std::string model30 = read_file(fs::path(step_dir(30)) / "model.safetensors");
  model30[model30.size() - 1] ^= 1;
  write_file(fs::path(step_dir(30)) / "model.safetensors", model30);
  auto found = ckpt::find_latest_valid(ckpt_);
  ASSERT_TRUE(found);
  ASSERT_EQ(found->step, 20);
  ASSERT_TRUE(ckpt::load_checkpoint(found->dir, a.gpt.params(), &a.opt));
  a.fake_steps(1, 3);
  ASSERT_TRUE(save(a, 30));  // the resumed run reaches step 30 again
  EXPECT_TRUE(ckpt::verify_checkpoint(step_dir(30)));
  // Resuming from 10 abandons 20 and 30: they must not be resumed from later.
  ASSERT_TRUE(save(a, 15));
  EXPECT_EQ(entries(), (std::vector<std::string>{"latest", "step_0000010", "step_0000015"}));
  EXPECT_EQ(ckpt::find_latest_valid(ckpt_)->step, 15);
}

class CheckpointFaultTest : public CheckpointTest,
                            public ::testing::WithParamInterface<const char*> {};

TEST_P(CheckpointFaultTest, FailedWriteLeavesThePreviousCheckpointInCharge) {
  const std::string file = GetParam();
  Model a(1);
  ASSERT_TRUE(save(a, 10));
  ckpt::inject_checkpoint_write_fault(20, file);
  a.fake_steps(1, 4);
  Status st = save(a, 20);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.code(), Code::kIo);
  EXPECT_EQ(st.message(),
            "[ckpt] writing step_0000020/" + file + ": injected write error (fault.inject)");
  EXPECT_EQ(entries(), (std::vector<std::string>{"latest", "step_0000010"}));
  EXPECT_EQ(read_file(fs::path(ckpt_) / "latest"), "step_0000010\n");
  EXPECT_TRUE(ckpt::verify_checkpoint(step_dir(10)));
  auto found = ckpt::find_latest_valid(ckpt_);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->step, 10);
  EXPECT_TRUE(found->warnings.empty());
  // The fault fired once: the retry succeeds.
  ASSERT_TRUE(save(a, 20));
  EXPECT_EQ(ckpt::find_latest_valid(ckpt_)->step, 20);
}

TEST_F(CheckpointTest, InjectedFaultWaitsForItsStep) {
  Model a(1);
  ckpt::inject_checkpoint_write_fault(30, "model.safetensors");
  EXPECT_TRUE(save(a, 20));
  EXPECT_FALSE(save(a, 30));
  EXPECT_TRUE(save(a, 30));
}

// ---- Read-back before publishing, and injected corruption ----

TEST_F(CheckpointTest, ACorruptedTmpFileFailsTheReadBackAndPublishesNothing) {
  Model a(1);
  ASSERT_TRUE(save(a, 10));
  for (const char* file : {"model.safetensors", "optimizer.safetensors", "manifest.json"}) {
    ckpt::inject_checkpoint_corruption(20, file, ckpt::CorruptAt::kBeforeVerify);
    Status st = save(a, 20);
    ASSERT_FALSE(st) << file;
    EXPECT_EQ(st.code(), Code::kIo);
    EXPECT_TRUE(st.message().starts_with(std::string("[ckpt] step_0000020.tmp/") + file + ":"))
        << st.message();
    EXPECT_TRUE(st.message().ends_with("(read back before publishing)")) << st.message();
    EXPECT_EQ(entries(), (std::vector<std::string>{"latest", "step_0000010"}));
    EXPECT_EQ(read_file(fs::path(ckpt_) / "latest"), "step_0000010\n");
  }
  ASSERT_TRUE(save(a, 20));  // each fired once
  EXPECT_TRUE(ckpt::verify_checkpoint(step_dir(20)));
}

TEST_F(CheckpointTest, InjectedCorruptionStrikesThePublishedCheckpoint) {
  Model a(1);
  ckpt::inject_checkpoint_corruption(20, "model.safetensors");
  ASSERT_TRUE(save(a, 10));  // not its step
  a.fake_steps(1, 4);
  ASSERT_TRUE(save(a, 20));  // written, verified, published, then damaged
  EXPECT_EQ(read_file(fs::path(ckpt_) / "latest"), "step_0000020\n");
  Status st = ckpt::verify_checkpoint(step_dir(20));
  ASSERT_FALSE(st);
  EXPECT_EQ(st.message(), "[ckpt] step_0000020/model.safetensors: checksum mismatch");
  auto found = ckpt::find_latest_valid(ckpt_);
  ASSERT_TRUE(found) << found.status().message();
  EXPECT_EQ(found->step, 10);
  ASSERT_EQ(found->warnings.size(), 1u);
  EXPECT_NE(found->warnings[0].find("step_0000020/model.safetensors"), std::string::npos)
      << found->warnings[0];
  ASSERT_TRUE(save(a, 30));  // it fired once
  EXPECT_TRUE(ckpt::verify_checkpoint(step_dir(30)));
}

TEST_F(CheckpointTest, VerifyWithAnExplicitStepChecksTheManifestsStep) {
  Model a(1);
  ASSERT_TRUE(save(a, 10));
  const std::string elsewhere = (dir_ / "copy").string();
  fs::copy(step_dir(10), elsewhere);
  EXPECT_TRUE(ckpt::verify_checkpoint(elsewhere, 10));
  Status st = ckpt::verify_checkpoint(elsewhere, 11);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.message(), "[ckpt] copy/manifest.json: records step 10, not 11");
}

INSTANTIATE_TEST_SUITE_P(Files, CheckpointFaultTest,
                         ::testing::Values("model.safetensors", "optimizer.safetensors",
                                           "manifest.json"),
                         [](const auto& info) {
                           std::string name = info.param;
                           return name.substr(0, name.find('.'));
                         });

TEST_F(CheckpointTest, LoadIntoAnotherModelNamesTheTensor) {
  Model a(1);
  ASSERT_TRUE(save(a, 1));
  Model wider(1, nn::GPTConfig{2, 2, 48, 64, 16});
  auto with_opt = ckpt::load_checkpoint(step_dir(1), wider.gpt.params(), &wider.opt);
  ASSERT_FALSE(with_opt);
  EXPECT_NE(with_opt.status().message().find("exp_avg.transformer.wte.weight"), std::string::npos)
      << with_opt.status().message();
  auto weights_only = ckpt::load_checkpoint(step_dir(1), wider.gpt.params(), nullptr);
  ASSERT_FALSE(weights_only);
  EXPECT_NE(weights_only.status().message().find("transformer.wte.weight"), std::string::npos)
      << weights_only.status().message();
}

}  // namespace
}  // namespace crucible
