#include "support/train_config.h"

#include <filesystem>

namespace crucible::testutil {

std::string write_small_config(const TempDir& dir, const SmallRun& r, const std::string& file) {
  namespace fs = std::filesystem;
  if (!fs::exists(dir / "corpus/computers")) {
    fs::create_directories(dir / "corpus");
    fs::copy_file("/usr/share/games/fortunes/computers", dir / "corpus/computers");
  }
  auto n = [](int v) { return std::to_string(v); };
  std::string cfg =
      "[model]\nn_layer = 2\nn_head = 2\nn_embd = 32\nvocab_size = 512\nseq_len = 32\n"
      "[data]\nsource = [\"" +
      dir / "corpus" +
      "\"]\nformat = \"fortunes\"\n"
      "cache_dir = \"" +
      dir / "data" +
      "\"\nval_fraction = 0.1\n"
      "[train]\nsteps = " +
      n(r.steps) + "\nbatch_size = " + n(r.batch) + "\ngrad_accum = " + n(r.accum) +
      "\nseed = " + n(r.seed) + "\neval_every = " + n(r.eval_every) +
      "\neval_batches = " + n(r.eval_batches) +
      "\nthreads = 1\n"
      "[optim]\nlr = 3e-3\nwarmup_steps = 2\n"
      "[ckpt]\nevery = " +
      n(r.ckpt_every) + "\nkeep = " + n(r.keep) +
      "\n"
      "[run]\nname = \"" +
      r.name + "\"\nsample_tokens = " + n(r.sample_tokens) + "\n" + r.extra;
  write_file(dir / file, cfg);
  return dir / file;
}

}  // namespace crucible::testutil
