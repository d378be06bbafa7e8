// fault.inject parsing: every kind, its options, and one-line errors naming
// the entry.
#include "runtime/faults.h"

#include <gtest/gtest.h>

namespace crucible::runtime {
namespace {

Result<std::vector<InjectedFault>> parse(std::vector<std::string> e) {
  FaultConfig f;
  f.inject = std::move(e);
  return parse_faults(f);
}

TEST(Faults, ParsesEveryKindWithItsOptions) {
  auto r = parse({"kill@5:rank=1", "hang@3:rank=2:attempt=all", "ckpt_write_error@8",
                  "ckpt_corrupt@4:file=optimizer.safetensors:attempt=1"});
  ASSERT_TRUE(r) << r.status().message();
  ASSERT_EQ(r->size(), 4u);
  EXPECT_EQ((*r)[0].kind, InjectedFault::Kind::kKill);
  EXPECT_EQ((*r)[0].step, 5);
  EXPECT_EQ((*r)[0].rank, 1);
  EXPECT_EQ((*r)[0].attempt, 0);
  EXPECT_EQ((*r)[1].kind, InjectedFault::Kind::kHang);
  EXPECT_EQ((*r)[1].rank, 2);
  EXPECT_EQ((*r)[1].attempt, -1);
  EXPECT_EQ((*r)[2].kind, InjectedFault::Kind::kCkptWriteError);
  EXPECT_EQ((*r)[2].file, "optimizer.safetensors");
  EXPECT_EQ((*r)[3].kind, InjectedFault::Kind::kCkptCorrupt);
  EXPECT_EQ((*r)[3].file, "optimizer.safetensors");
  EXPECT_EQ((*r)[3].attempt, 1);
  auto slow = parse({"slow@2:rank=1:ms=250"});
  ASSERT_TRUE(slow) << slow.status().message();
  EXPECT_EQ((*slow)[0].kind, InjectedFault::Kind::kSlow);
  EXPECT_EQ((*slow)[0].ms, 250);
  auto d = parse({"ckpt_corrupt@4"});
  ASSERT_TRUE(d);
  EXPECT_EQ((*d)[0].file, "model.safetensors");
  EXPECT_EQ((*d)[0].rank, 0);
  // A sharded checkpoint's part is written by its own rank.
  auto part = parse({"ckpt_write_error@8:rank=1"});
  ASSERT_TRUE(part) << part.status().message();
  EXPECT_EQ((*part)[0].rank, 1);
}

TEST(Faults, BadEntriesAreOneLineErrorsNamingThem) {
  for (const char* entry :
       {"disk_on_fire@3", "kill", "kill@0", "kill@x", "kill@3:rank=-1", "kill@3:file=a",
        "ckpt_corrupt@3:rank=-1", "hang@3:attempt=soon", "hang@3:color=red", "kill@3:ms=5", "slow@3:ms=-1"}) {
    const std::string e = entry;
    auto r = parse({e});
    ASSERT_FALSE(r) << e;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << e;
    EXPECT_NE(r.status().message().find("fault.inject: '" + e + "'"), std::string::npos)
        << r.status().message();
    EXPECT_EQ(r.status().message().find('\n'), std::string::npos);
  }
}

}  // namespace
}  // namespace crucible::runtime
