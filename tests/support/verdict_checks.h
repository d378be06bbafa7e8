// Assertions on quality-filter verdicts (data/quality.h), shared by the
// filter tests.
#pragma once
#include <gtest/gtest.h>

#include <string_view>

#include "data/quality.h"

namespace crucible::data {

inline void expect_removed(const Verdict& v, std::string_view rule) {
  EXPECT_FALSE(v.keep) << "expected removal by " << rule;
  EXPECT_EQ(v.rule, rule);
}

inline void expect_kept(const Verdict& v) {
  EXPECT_TRUE(v.keep) << "removed by " << v.rule << " value " << v.value << " threshold "
                      << v.threshold;
  EXPECT_TRUE(v.rule.empty());
}

}  // namespace crucible::data
