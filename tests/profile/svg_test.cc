#include "profile/svg.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <regex>

// Designated initializers leave defaulted members out; GCC warns regardless.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace crucible::profile::svg {
namespace {

size_t count(const std::string& s, const std::string& needle) {
  size_t n = 0;
  for (size_t p = s.find(needle); p != std::string::npos; p = s.find(needle, p + 1)) ++n;
  return n;
}

// Every number inside an attribute value of the SVG.
std::vector<std::string> attribute_numbers(const std::string& s) {
  std::vector<std::string> out;
  std::regex attr(R"re((x|y|x1|x2|y1|y2|cx|cy|width|height|d)="([^"]*)")re");
  for (auto it = std::sregex_iterator(s.begin(), s.end(), attr); it != std::sregex_iterator(); ++it)
    out.push_back((*it)[2]);
  return out;
}

TEST(Svg, EscapesText) {
  EXPECT_EQ(escape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&#39;");
  Chart c{.title = "<script>alert(1)</script>"};
  c.series.push_back({.name = "x&y", .x = {1, 2}, .y = {1, 2}});
  const std::string out = render(c);
  EXPECT_EQ(out.find("<script>"), std::string::npos);
  EXPECT_NE(out.find("data-series=\"x&amp;y\""), std::string::npos);
}

TEST(Svg, NiceTicksCoverTheRange) {
  auto t = ticks(0.3, 9.7, false);
  ASSERT_GE(t.size(), 3u);
  EXPECT_LE(t.front(), 0.3);
  EXPECT_GE(t.back(), 9.7);
  EXPECT_EQ(t[1] - t[0], 2.0);  // (9.7-0.3)/5 -> step 2
  auto l = ticks(3, 4000, true);
  EXPECT_EQ(l.front(), 1.0);
  EXPECT_EQ(l.back(), 10000.0);
  EXPECT_EQ(l.size(), 5u);
  EXPECT_EQ(ticks(-1, 1, false).front(), -1.0);
}

TEST(Svg, EverySeriesFindableAndNonFiniteSkipped) {
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  Chart c{.title = "t", .x_label = "step", .y_label = "ms"};
  c.series.push_back({.name = "forward", .x = {1, 2, 3}, .y = {1, nan, 3}, .kind = Kind::kStacked});
  c.series.push_back(
      {.name = "backward", .x = {1, 2, 3}, .y = {2, 2, inf}, .kind = Kind::kStacked});
  c.series.push_back({.name = "total", .x = {1, 2, 3, 4}, .y = {3, nan, 5, 6}});
  c.series.push_back(
      {.name = "pts", .x = {1, 2}, .y = {1, 2}, .kind = Kind::kPoints, .labels = {"a", "b"}});
  c.markers.push_back({2, "ckpt", "#f00"});
  const std::string out = render(c);
  for (const char* s : {"forward", "backward", "total", "pts", "markers"})
    EXPECT_NE(out.find(std::string("data-series=\"") + s + "\""), std::string::npos) << s;
  // The NaN splits the line into two pieces: two "M" commands.
  const size_t at = out.find("data-series=\"total\"");
  const std::string total = out.substr(at, out.find("</g>", at) - at);
  EXPECT_EQ(count(total, "M"), 2u);
  EXPECT_EQ(count(out, "<circle"), 2u);
  for (const std::string& v : attribute_numbers(out)) {
    EXPECT_EQ(v.find("nan"), std::string::npos) << v;
    EXPECT_EQ(v.find("inf"), std::string::npos) << v;
  }
}

TEST(Svg, LogAxesDropNonPositive) {
  Chart c{.title = "roof", .log_x = true, .log_y = true};
  c.series.push_back(
      {.name = "k", .x = {0, 1, 10, 100}, .y = {5, -1, 10, 100}, .kind = Kind::kPoints});
  const std::string out = render(c);
  EXPECT_EQ(count(out, "<circle"), 2u);             // (10,10) and (100,100)
  EXPECT_NE(out.find(">100<"), std::string::npos);  // a decade tick label
}

TEST(Svg, EmptyChartStillValid) {
  const std::string out = render(Chart{.title = "nothing"});
  EXPECT_EQ(out.rfind("<svg", 0), 0u);
  EXPECT_EQ(out.substr(out.size() - 6), "</svg>");
}

TEST(Svg, GroupedBars) {
  BarChart b{.title = "ranks", .y_label = "ms", .categories = {"forward", "backward"}};
  b.series.push_back({.name = "rank 0", .y = {10, 20}});
  b.series.push_back({.name = "rank 1", .y = {12, std::nan("")}});
  const std::string out = render(b);
  EXPECT_NE(out.find("data-series=\"rank 0\""), std::string::npos);
  EXPECT_NE(out.find("data-series=\"rank 1\""), std::string::npos);
  EXPECT_EQ(count(out, "</rect>"), 3u);  // bars carry a <title>; the NaN has none
  // Bars grow from the same baseline: the tallest (20) is the highest.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex(R"(rank 0 backward: 20)")));
}

TEST(Svg, FormatNumber) {
  EXPECT_EQ(format_number(0), "0");
  EXPECT_EQ(format_number(1234.4), "1234");
  EXPECT_EQ(format_number(2.5e9), "2.5e+09");
  EXPECT_EQ(format_number(std::nan("")), "-");
}

}  // namespace
}  // namespace crucible::profile::svg
