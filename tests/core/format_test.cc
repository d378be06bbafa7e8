// format_double: the shortest text that reads back to the same double
// (config.toml and the report's configuration table use it:
// tests/runtime/config_test.cc).
#include "core/format.h"

#include <gtest/gtest.h>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "core/rng.h"

namespace crucible {
namespace {

double parse(const std::string& s) {
  double v = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  EXPECT_EQ(r.ptr, s.data() + s.size()) << s;
  return v;
}

TEST(FormatDouble, ShortestTextThatReadsBackToTheSameValue) {
  EXPECT_EQ(format_double(0.1), "0.1");     // not 0.10000000000000001
  EXPECT_EQ(format_double(3e-4), "3e-04");  // the shorter of the two spellings
  EXPECT_EQ(format_double(0.0125), "0.0125");
  EXPECT_EQ(format_double(0.95), "0.95");
  EXPECT_EQ(format_double(1e308), "1e+308");
  EXPECT_EQ(format_double(2), "2");
  EXPECT_EQ(format_double(-0.5), "-0.5");
  EXPECT_EQ(format_double(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(format_double(-std::numeric_limits<double>::infinity()), "-inf");
  EXPECT_EQ(format_double(std::nan("")), "nan");
  Rng rng(7, 1);
  for (int i = 0; i < 10000; ++i) {  // random bit patterns: every exponent, every mantissa
    const uint64_t bits = uint64_t(rng.next_u32()) << 32 | rng.next_u32();
    double v;
    std::memcpy(&v, &bits, sizeof v);
    if (!std::isfinite(v)) continue;
    const std::string s = format_double(v);
    EXPECT_EQ(parse(s), v) << s;
    EXPECT_LE(s.size(), 24u) << s;
  }
}

}  // namespace
}  // namespace crucible
