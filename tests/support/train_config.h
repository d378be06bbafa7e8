// A small training setup for end-to-end tests: one file of Debian's fortunes
// as the corpus (copied into the test's directory) and a 2-layer, 32-wide GPT
// whose whole run takes seconds.
#pragma once
#include <string>

#include "support/files.h"

namespace crucible::testutil {

struct SmallRun {
  int steps = 12;
  int batch = 4;
  int accum = 2;
  int seed = 7;
  int eval_every = 4;
  int eval_batches = 2;
  int ckpt_every = 4;
  int keep = 3;
  std::string name = "e2e";
  int sample_tokens = 8;
  std::string extra;  // more TOML sections, appended
};

// 8 steps, checkpoints at 4 and 8, no samples: the shortest run with a
// resumable middle.
inline SmallRun short_run() {
  SmallRun r;
  r.steps = 8;
  r.ckpt_every = 4;
  r.sample_tokens = 0;
  return r;
}

// Writes dir/<file> (the corpus goes to dir/corpus, the dataset cache to
// dir/data) and returns its path.
std::string write_small_config(const TempDir& dir, const SmallRun& run,
                               const std::string& file = "cfg.toml");

}  // namespace crucible::testutil
