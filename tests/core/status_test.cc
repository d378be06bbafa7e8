#include "core/status.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>

namespace crucible {
namespace {

TEST(Status, DefaultAndOkAreOk) {
  Status s;
  EXPECT_TRUE(s.is_ok());
  EXPECT_TRUE(bool(s));
  EXPECT_EQ(s.code(), Code::kOk);
  EXPECT_EQ(s.message(), "");
  EXPECT_TRUE(Status::ok().is_ok());
}

TEST(Status, FactoriesSetCodeAndMessage) {
  struct Case {
    Status s;
    Code code;
  };
  Case cases[] = {
      {Status::invalid("[cfg] bad"), Code::kInvalidArgument},
      {Status::not_found("[cfg] bad"), Code::kNotFound},
      {Status::corrupt("[cfg] bad"), Code::kCorrupt},
      {Status::io("[cfg] bad"), Code::kIo},
      {Status::internal("[cfg] bad"), Code::kInternal},
      {Status::error(Code::kUnavailable, "[cfg] bad"), Code::kUnavailable},
  };
  for (auto& c : cases) {
    EXPECT_FALSE(c.s.is_ok());
    EXPECT_FALSE(bool(c.s));
    EXPECT_EQ(c.s.code(), c.code);
    EXPECT_EQ(c.s.message(), "[cfg] bad");
  }
}

TEST(Status, CopiesCarryTheError) {
  Status a = Status::corrupt("[ckpt] manifest checksum mismatch in step_0000120");
  Status b = a;
  Status c;
  c = std::move(a);
  EXPECT_EQ(b.code(), Code::kCorrupt);
  EXPECT_EQ(c.code(), Code::kCorrupt);
  EXPECT_EQ(b.message(), c.message());
  c = Status::ok();
  EXPECT_TRUE(c.is_ok());
  EXPECT_FALSE(b.is_ok());
}

Status fails_at(int step, int fail_step, int* reached) {
  *reached = step;
  if (step == fail_step) return Status::io("[io] step " + std::to_string(step));
  return Status::ok();
}

Status run_steps(int fail_step, int* reached) {
  for (int i = 0; i < 5; ++i) CRUCIBLE_RETURN_IF_ERROR(fails_at(i, fail_step, reached));
  return Status::ok();
}

TEST(Status, ReturnIfErrorStopsAtTheFirstError) {
  int reached = -1;
  EXPECT_TRUE(run_steps(-1, &reached).is_ok());
  EXPECT_EQ(reached, 4);
  Status s = run_steps(2, &reached);
  EXPECT_EQ(reached, 2);
  EXPECT_EQ(s.code(), Code::kIo);
  EXPECT_EQ(s.message(), "[io] step 2");
}

Result<int> parse_positive(int x) {
  if (x <= 0) return Status::invalid("[parse] not positive: " + std::to_string(x));
  return x;
}

TEST(Result, HoldsAValue) {
  Result<int> r = parse_positive(3);
  ASSERT_TRUE(r.is_ok());
  EXPECT_TRUE(bool(r));
  EXPECT_TRUE(r.status().is_ok());
  EXPECT_EQ(r.value(), 3);
  EXPECT_EQ(*r, 3);
  *r = 4;
  EXPECT_EQ(r.value(), 4);
}

TEST(Result, HoldsAnError) {
  Result<int> r = parse_positive(-1);
  EXPECT_FALSE(r.is_ok());
  EXPECT_FALSE(bool(r));
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "[parse] not positive: -1");
}

TEST(Result, MoveOnlyValuesAndArrow) {
  Result<std::unique_ptr<std::string>> r = std::make_unique<std::string>("abc");
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ((*r)->size(), 3u);
  std::unique_ptr<std::string> p = std::move(r).value();
  EXPECT_EQ(*p, "abc");

  Result<std::string> s = std::string("hello");
  EXPECT_EQ(s->size(), 5u);
}

TEST(ResultDeathTest, ConstructingFromAnOkStatusAborts) {
  EXPECT_DEATH(
      {
        Result<int> r(Status::ok());
        (void)r;
      },
      "ok Status");
}

}  // namespace
}  // namespace crucible
