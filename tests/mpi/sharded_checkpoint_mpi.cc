// Sharded checkpoints across real MPI ranks (2 and 4): every rank holds one
// part of the same model (tensor-parallel shards, pipeline stages, both, or
// under ZeRO the whole model or a part with a shard of its moments whose
// ranges cut tensors mid-row) with the whole model's weights and moments,
// the ranks write one checkpoint in parallel (rank 0 publishing), and then:
//   - consolidated (the export's path: a whole model loaded from it, saved as
//     safetensors), it is the same file, byte for byte, whatever layout
//     wrote it, and the same as the whole model's own;
//   - every rank loads its part of *another* layout from it: exactly its
//     slices of the whole weights and moments;
//   - the parts' files hold no rank's more than its part, and the ZeRO
//     shards' files every moment exactly once;
//   - finding the checkpoint to resume, the ranks share the hashing (each
//     file's bytes read by one rank of the job, not by each, the files dealt
//     by size) and agree: a checkpoint with one damaged file, hashed by one
//     rank only, is skipped by all, every rank naming that file.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <random>
#include <vector>

#include "ckpt/checkpoint.h"
#include "ckpt/model_io.h"
#include "ckpt/safetensors.h"
#include "comm/comm.h"
#include "nn/gpt.h"
#include "optim/adamw.h"
#include "parallel/layout.h"
#include "parallel/tensor_parallel.h"
#include "runtime/train_step.h"
#include "runtime/world.h"
#include "support/files.h"

namespace crucible::parallel {
namespace {

namespace fs = std::filesystem;
comm::Comm* comm() { return *comm::world(); }

const nn::GPTConfig kModel{4, 4, 32, 103, 16};

// A ZeRO-style shard of a flat buffer of n elements for data-parallel rank
// d of D: its piece of each of two buckets, as parallel/data_parallel.cc
// cuts them (the boundaries fall inside tensors).
std::vector<optim::Range> zero_shard(size_t n, int D, int d) {
  std::vector<optim::Range> out;
  for (size_t b = 0; b < 2; ++b) {
    const size_t lo = b * n / 2, hi = (b + 1) * n / 2, len = hi - lo;
    out.push_back({lo + len * size_t(d) / size_t(D), lo + len * size_t(d + 1) / size_t(D)});
  }
  return out;
}

// A part of the model at this rank of a layout, with its TP group's
// collectives; zero: its optimizer holds its data-parallel rank's shard.
struct Holder {
  std::unique_ptr<comm::Comm> tp_comm;
  std::unique_ptr<CommTensorParallel> tp;
  std::unique_ptr<nn::GPT> model;
  std::unique_ptr<optim::AdamW> adam;
};

Holder hold(const Layout& L, bool zero = false) {
  Holder h;
  auto tp = comm()->split(L.coords(comm()->rank()).dp * L.pp() + L.coords(comm()->rank()).pp, comm()->rank());
  EXPECT_TRUE(tp) << tp.status().message();
  h.tp_comm = std::move(*tp);
  h.tp = std::make_unique<CommTensorParallel>(*h.tp_comm);
  h.model = std::make_unique<nn::GPT>(kModel, parallel::stage_part(L, L.coords(comm()->rank()), kModel), h.tp.get());
  const size_t n = h.model->params().numel();
  h.adam = std::make_unique<optim::AdamW>(
      h.model->params(), optim::AdamWConfig{},
      zero && L.dp() > 1 ? zero_shard(n, L.dp(), L.coords(comm()->rank()).dp) : std::vector<optim::Range>{});
  return h;
}

// The whole model with random weights and moments (the same on every rank).
struct Whole {
  nn::GPT model{kModel};
  std::vector<float> m, v;
  Whole() {
    std::mt19937_64 rng(5);
    std::normal_distribution<float> normal(0.0f, 0.1f);
    const size_t n = model.params().numel();
    m.resize(n), v.resize(n);
    for (size_t i = 0; i < n; ++i) {
      model.params().values()[i] = normal(rng);
      m[i] = normal(rng);
      v[i] = std::fabs(normal(rng));
    }
  }
  // Loads the part's slices of the whole (weights and moments).
  void fill(Holder& h) const {
    std::vector<float> pm(h.model->params().numel()), pv(pm.size());
    for (const nn::ParamSpec& s : h.model->params().specs()) {
      const nn::ParamSpec* w = model.params().find(s.name);
      nn::copy_from_whole(s, model.params().values() + w->offset, h.model->params().values() + s.offset);
      nn::copy_from_whole(s, m.data() + w->offset, pm.data() + s.offset);
      nn::copy_from_whole(s, v.data() + w->offset, pv.data() + s.offset);
    }
    h.adam->import_moments(pm.data(), pv.data());
    h.adam->set_steps_taken(3);
  }
};

// A layout, and whether its optimizer is ZeRO-sharded over its dp ranks.
struct Case {
  Layout layout;
  bool zero = false;
  std::string describe() const { return layout.describe() + (zero ? " zero" : ""); }
};

// Writes step `step` of the case's checkpoint into ckpt_dir, as the
// trainer's Checkpointer does (runtime/checkpointer.cc).
void write_sharded(const Case& c, const Whole& whole, const std::string& ckpt_dir, int64_t step) {
  const Layout& L = c.layout;
  Holder h = hold(L, c.zero);
  whole.fill(h);
  ckpt::CheckpointState state;
  state.step = step;
  state.world = {{"world_size", L.world()}, {"tp", L.tp()}, {"pp", L.pp()}};
  const int parts = L.tp() * L.pp(), rank = comm()->rank();
  const int writers = c.zero && L.dp() > 1 ? L.world() : parts;
  if (rank < writers) {
    ckpt::Snapshot snap;
    ckpt::take_snapshot(state, h.model->params(), *h.adam, snap, /*weights=*/L.coords(rank).dp == 0);
    if (parts > 1) std::erase_if(snap.specs, [](const nn::ParamSpec& s) { return s.replica; });
    snap.part = parts > 1 ? rank % parts : -1;
    snap.moment_shard = writers > parts ? L.coords(rank).dp : -1;
    snap.writer = writers > 1 ? rank : -1;
    snap.writers = writers;
    if (rank == 0 && writers > 1) {
      ASSERT_TRUE(ckpt::begin_sharded_checkpoint(ckpt_dir, step));
    }
    ASSERT_TRUE(comm()->barrier());
    Status s = ckpt::write_checkpoint(ckpt_dir, snap, 10);
    EXPECT_TRUE(s) << s.message();
  } else {
    ASSERT_TRUE(comm()->barrier());
  }
  ASSERT_TRUE(comm()->barrier());
}

std::string shared_dir(std::unique_ptr<testutil::TempDir>& owner) {
  std::string path;
  if (comm()->rank() == 0) {
    owner = std::make_unique<testutil::TempDir>("sharded_ckpt");
    path = owner->path();
  }
  uint64_t n = path.size();
  EXPECT_TRUE(comm()->broadcast(&n, sizeof n, 0));
  path.resize(n);
  EXPECT_TRUE(comm()->broadcast(path.data(), n, 0));
  return path;
}

std::vector<Case> cases() {
  const int W = comm()->size();
  std::vector<std::pair<LayoutSpec, bool>> specs = {
      {{W, 1, 1, "1f1b"}, false}, {{1, W, 1, "1f1b"}, false}, {{1, 1, 1, "1f1b"}, true}};
  if (W == 4) {
    specs.push_back({{2, 2, 1, "1f1b"}, false});
    specs.push_back({{2, 1, 1, "1f1b"}, true});  // dp 2 x tp 2, ZeRO over dp
    specs.push_back({{1, 2, 1, "1f1b"}, true});  // dp 2 x pp 2
  }
  std::vector<Case> out;
  for (const auto& [s, zero] : specs) {
    auto l = Layout::make(s, W, kModel, 4);
    EXPECT_TRUE(l) << l.status().message();
    out.push_back({*l, zero});
  }
  return out;
}

// Elements of the tensors a checkpoint's `kind` files hold, summed.
size_t stored_elements(const std::string& step_dir, const std::string& kind) {
  size_t total = 0;
  for (const auto& e : fs::directory_iterator(step_dir)) {
    if (!e.path().filename().string().starts_with(kind)) continue;
    auto f = ckpt::read_safetensors(e.path().string());
    EXPECT_TRUE(f) << f.status().message();
    if (f)
      for (const auto& [name, t] : f->tensors) total += size_t(t.numel());
  }
  return total;
}

TEST(ShardedCheckpoint, EveryLayoutConsolidatesToTheSameFileAndReshards) {
  std::unique_ptr<testutil::TempDir> owner;
  const std::string dir = shared_dir(owner);
  const Whole whole;
  const std::vector<Case> all = cases();
  std::string reference;
  if (comm()->rank() == 0) {
    ASSERT_TRUE(ckpt::save_params(whole.model.params(), dir + "/whole.safetensors", false, {{"format", "pt"}}));
    reference = testutil::read_file(dir + "/whole.safetensors");
  }
  for (size_t i = 0; i < all.size(); ++i) {
    const std::string ckpt_dir = dir + "/ckpt" + std::to_string(i);
    write_sharded(all[i], whole, ckpt_dir, 7);
    const std::string step_dir = ckpt_dir + "/step_0000007";
    if (comm()->rank() == 0) {
      // Consolidated, as crucible export does.
      nn::GPT model(kModel);
      auto st = ckpt::load_checkpoint(step_dir, model.params(), nullptr);
      ASSERT_TRUE(st) << st.status().message();
      ASSERT_TRUE(ckpt::save_params(model.params(), dir + "/export.safetensors", false, {{"format", "pt"}}));
      EXPECT_TRUE(testutil::read_file(dir + "/export.safetensors") == reference)
          << all[i].describe() << ": the export differs from the whole model's file";
      // No part's file holds more than its part; the moments' files hold
      // every moment of the whole model once (no rank gathered them).
      const Layout& L = all[i].layout;
      const int parts = L.tp() * L.pp();
      EXPECT_EQ(fs::exists(step_dir + "/model.safetensors"), parts == 1) << all[i].describe();
      for (int k = 0; parts > 1 && k < parts; ++k)
        EXPECT_LT(fs::file_size(step_dir + "/" + ckpt::part_file_name("model", k)), reference.size());
      size_t elements = 0;
      for (const nn::ParamSpec& s : whole.model.params().specs()) elements += s.numel;
      EXPECT_EQ(stored_elements(step_dir, "model"), elements) << all[i].describe();
      EXPECT_EQ(stored_elements(step_dir, "optimizer"), 2 * elements) << all[i].describe();
      if (all[i].zero)
        for (int r = 0; r < L.world(); ++r) {
          const int part = parts > 1 ? r % parts : -1;
          const std::string f = step_dir + "/" + ckpt::moments_file_name(part, L.coords(r).dp);
          ASSERT_TRUE(fs::exists(f)) << all[i].describe() << ": " << f;
        }
    }
    // Resharded: every rank's part of the next layout, weights and moments exact.
    const Case& next = all[(i + 1) % all.size()];
    Holder h = hold(next.layout, next.zero);
    auto st = ckpt::load_checkpoint(step_dir, h.model->params(), h.adam.get(), /*part=*/true);
    ASSERT_TRUE(st) << st.status().message();
    EXPECT_EQ(h.adam->steps_taken(), 3);
    Holder want = hold(next.layout, next.zero);
    whole.fill(want);
    const size_t n = h.model->params().numel();
    std::vector<float> m1(n), v1(n), m2(n), v2(n);
    h.adam->export_moments(m1.data(), v1.data());
    want.adam->export_moments(m2.data(), v2.data());
    EXPECT_EQ(std::memcmp(h.model->params().values(), want.model->params().values(), n * sizeof(float)), 0)
        << all[i].describe() << " -> " << next.describe() << ": weights";
    EXPECT_TRUE(m1 == m2 && v1 == v2) << all[i].describe() << " -> " << next.describe() << ": moments";
    ASSERT_TRUE(comm()->barrier());
  }
}

TEST(ShardedCheckpoint, RanksShareTheVerificationAndAgreeOnTheVerdict) {
  std::unique_ptr<testutil::TempDir> owner;
  const std::string dir = shared_dir(owner);
  const Whole whole;
  const int W = comm()->size();
  auto L = Layout::make({W, 1, 1, "1f1b"}, W, kModel, 4);  // tp = W: 2 W files per checkpoint
  ASSERT_TRUE(L);
  const std::string ckpt_dir = dir + "/ckpt";
  write_sharded({*L, false}, whole, ckpt_dir, 7);
  write_sharded({*L, false}, whole, ckpt_dir, 8);
  const nlohmann::json manifest = nlohmann::json::parse(testutil::read_file(ckpt_dir + "/step_0000008/manifest.json"));
  ASSERT_GE(manifest["files"].size(), size_t(2 * W));
  double total = 0;
  for (const auto& f : manifest["files"]) total += f["bytes"].get<double>();

  const ckpt::VerifyShare share = runtime::verify_share(*comm());
  const uint64_t before = ckpt::detail::hashed_bytes();
  auto found = ckpt::find_latest_valid(ckpt_dir, &share);
  ASSERT_TRUE(found) << found.status().message();
  EXPECT_EQ(found->step, 8);
  EXPECT_TRUE(found->warnings.empty());
  double sum = double(ckpt::detail::hashed_bytes() - before), most = sum;
  ASSERT_TRUE(comm()->allreduce(&sum, 1, comm::ReduceOp::kSum));
  ASSERT_TRUE(comm()->allreduce(&most, 1, comm::ReduceOp::kMax));
  EXPECT_EQ(sum, total) << "every byte of the checkpoint hashed exactly once in the job";
  // Files are dealt by size, so no rank reads much more than its share or
  // the largest file (part 0's optimizer file: it holds the embedding and
  // the tensors the TP group replicates). A round-robin deal, by contrast,
  // gave rank 0 the model files and rank 1 the optimizer files at W = 2
  // (1.33x its share).
  size_t largest = 0;
  for (size_t i = 0; i < manifest["files"].size(); ++i)
    if (manifest["files"][i]["bytes"].get<uint64_t>() > manifest["files"][largest]["bytes"].get<uint64_t>()) largest = i;
  const double biggest = manifest["files"][largest]["bytes"].get<double>();
  EXPECT_LE(most, std::max(total / W, biggest) * 1.1) << "one rank hashed more than its share";

  // Damage the largest file: the deal gives it to rank 0 alone.
  const std::string victim = manifest["files"][largest]["name"].get<std::string>();
  if (comm()->rank() == 0) {
    std::string bytes = testutil::read_file(ckpt_dir + "/step_0000008/" + victim);
    bytes[bytes.size() / 2] ^= 0x10;
    testutil::write_file(ckpt_dir + "/step_0000008/" + victim, bytes);
  }
  ASSERT_TRUE(comm()->barrier());
  auto older = ckpt::find_latest_valid(ckpt_dir, &share);
  ASSERT_TRUE(older) << older.status().message();
  EXPECT_EQ(older->step, 7) << "rank " << comm()->rank();
  ASSERT_EQ(older->warnings.size(), 1u);
  EXPECT_NE(older->warnings[0].find("step_0000008/" + victim + ": checksum mismatch"), std::string::npos)
      << "rank " << comm()->rank() << ": " << older->warnings[0];
  // The one-process search (a supervisor's, an export's) agrees.
  auto alone = ckpt::find_latest_valid(ckpt_dir);
  ASSERT_TRUE(alone);
  EXPECT_EQ(alone->step, 7);
  ASSERT_TRUE(comm()->barrier());
}

}  // namespace
}  // namespace crucible::parallel
