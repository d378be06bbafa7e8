// Reading a Slurm job's queue times from `scontrol show job -o` (runtime/slurm.h).
#include "runtime/slurm.h"

#include <gtest/gtest.h>

namespace crucible::runtime {
namespace {

TEST(SlurmJob, QueueWaitIsSubmitToStartAndARequeueCounts) {
  // A requeued job, as Slurm 22.05 prints it (abridged; one line).
  const std::string line =
      "JobId=42 JobName=train UserId=root(0) Priority=1 Reason=None Dependency=(null) Requeue=1 Restarts=1 "
      "BatchFlag=1 RunTime=00:00:01 SubmitTime=2026-12-02T18:24:29 EligibleTime=2026-12-02T18:24:35 "
      "AccrueTime=2026-12-02T18:24:35 StartTime=2026-12-02T18:24:36 EndTime=Unknown";
  const SlurmJob j = parse_scontrol_job(line);
  EXPECT_EQ(j.id, "42");
  EXPECT_EQ(j.restarts, 1);
  EXPECT_EQ(j.reason, "None");
  EXPECT_EQ(j.submit, "2026-12-02T18:24:29");
  EXPECT_DOUBLE_EQ(j.wait_s, 7.0);
}

TEST(SlurmJob, UnknownTimesLeaveTheWaitUnknown) {
  const SlurmJob j = parse_scontrol_job("JobId=7 Reason=Resources SubmitTime=2026-12-02T10:00:00 StartTime=Unknown");
  EXPECT_EQ(j.reason, "Resources");
  EXPECT_EQ(j.wait_s, -1);
  EXPECT_EQ(parse_scontrol_job("garbage without fields").id, "");
}

}  // namespace
}  // namespace crucible::runtime
