// The launcher's stderr as the user reads it: mpirun's banners around a
// rank's exit code are dropped, everything else (the ranks' lines, mpirun's
// other boxes) passes through whole, whatever the pieces the pipe delivers;
// and `crucible launch` end to end, where a refusal the ranks find reaches
// the user as their one line, and one the launcher can find before mpirun
// is refused there.
#include "runtime/launcher_stderr.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "support/cli_runner.h"

namespace crucible::runtime {
namespace {

const std::string kRule(74, '-');
// What Open MPI 4.1.4 prints around a rank's exit 2, as captured here.
const std::string kExitBanners =
    kRule + "\nPrimary job  terminated normally, but 1 process returned\n" +
    "a non-zero exit code. Per user-direction, the job has been aborted.\n" + kRule + "\n" + kRule +
    "\nmpirun detected that one or more processes exited with non-zero status, thus "
    "causing\nthe job to be terminated. The first process to do so was:\n\n"
    "  Process name: [[13762,1],0]\n  Exit code:    2\n" +
    kRule + "\n";
const std::string kSlotsBox =
    kRule + "\nThere are not enough slots available in the system to satisfy the 64\n" +
    "slots that were requested by the application:\n" + kRule + "\n";

// The filter's output for `text` fed in pieces of `piece` bytes.
std::string filtered(const std::string& text, size_t piece) {
  MpirunBannerFilter f;
  std::string out;
  for (size_t at = 0; at < text.size(); at += piece)
    out += f.feed(std::string_view(text).substr(at, piece));
  return out + f.finish();
}

TEST(MpirunBannerFilter, DropsTheExitCodeBannersAndKeepsEverythingElse) {
  const std::string rank = "[data] dataset /nonexistent: missing /nonexistent/tokenizer.model\n";
  for (size_t piece : {size_t(1), size_t(7), size_t(64), size_t(100000)}) {
    SCOPED_TRACE(piece);
    EXPECT_EQ(filtered(rank + kExitBanners, piece), rank);
    EXPECT_EQ(filtered(kExitBanners + rank, piece), rank);
    // mpirun's own errors are boxes too: they stay, whole.
    EXPECT_EQ(filtered(kSlotsBox + rank + kExitBanners, piece), kSlotsBox + rank);
    // A last line without its newline, an unclosed box: printed at the end.
    EXPECT_EQ(filtered(rank + "partial", piece), rank + "partial");
    EXPECT_EQ(filtered(kRule + "\nunclosed\n", piece), kRule + "\nunclosed\n");
    EXPECT_EQ(filtered("a line with --- dashes\n------\n", piece),
              "a line with --- dashes\n------\n");
  }
}

}  // namespace
}  // namespace crucible::runtime

namespace crucible::e2e {
namespace {

TEST(LaunchCli, ARefusalTheRanksFindIsTheirLineWithoutMpirunsBanners) {
  TempDir dir("launch_refusal");
  auto r = run_crucible({"launch", "-n", "2", "--", "train", "--set", "data.dataset=/nonexistent",
                         "--run-dir", "runs/r"},
                        dir.path());
  EXPECT_EQ(r.code, 2) << r.output;
  const std::string line = "[data] dataset /nonexistent: missing /nonexistent/tokenizer.model";
  const size_t at = r.output.find(line);
  EXPECT_NE(at, std::string::npos) << r.output;
  EXPECT_EQ(r.output.find(line, at + 1), std::string::npos) << "printed twice:\n" << r.output;
  for (const char* banner : {"Primary job", "mpirun detected", "-----"})
    EXPECT_EQ(r.output.find(banner), std::string::npos) << banner << " in:\n" << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "runs/r"))
      << "a refused fresh run leaves its directory";
  // Not the ranks': the layout on 3 ranks is refused before mpirun starts.
  auto grid = run_crucible(
      {"launch", "-n", "3", "--", "train", "--set", "dist.tp=2", "--run-dir", "runs/g"},
      dir.path());
  EXPECT_EQ(grid.code, 2) << grid.output;
  EXPECT_EQ(grid.output,
            "[layout] dist.tp x dist.pp: 2 x 1 does not divide the world of 3 ranks (dp x tp x pp "
            "must equal it)\n");
  // An unsupervised command: its ranks' lines, no banner, the exit code.
  auto probe = run_crucible({"launch", "-n", "2", "--", "probe", "--sections", "gpus"}, dir.path());
  EXPECT_EQ(probe.code, 2) << probe.output;
  EXPECT_NE(probe.output.find("unknown section 'gpus'"), std::string::npos) << probe.output;
  EXPECT_EQ(probe.output.find("Primary job"), std::string::npos) << probe.output;
  EXPECT_EQ(probe.output.find("mpirun detected"), std::string::npos) << probe.output;
}

}  // namespace
}  // namespace crucible::e2e
