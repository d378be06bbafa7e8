// The report in a real browser: Debian's chromium-headless-shell loads the
// rendered page, and the test fails on any console message (script errors,
// blocked loads) and on a DOM without the charts. A screenshot is left in the
// build directory (report_screenshot.png) for people to look at. Skipped when
// no headless Chromium is installed (scripts/setup.sh installs it; CI has it).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "profile/report.h"
#include "support/files.h"

namespace crucible::profile {
namespace {

namespace fs = std::filesystem;
using testutil::TempDir;
using testutil::write_file;

std::string find_chromium() {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  for (const char* name : {"chromium-headless-shell", "chromium", "chromium-browser"}) {
    size_t start = 0;
    while (start <= dirs.size()) {
      size_t end = dirs.find(':', start);
      if (end == std::string::npos) end = dirs.size();
      const std::string candidate = dirs.substr(start, end - start) + "/" + name;
      if (::access(candidate.c_str(), X_OK) == 0) return candidate;
      start = end + 1;
    }
  }
  return "";
}

struct BrowserRun {
  int rc = -1;
  std::string output;  // stdout and stderr
};

// One headless load of `html_path` with `mode` ("--dump-dom" or
// "--screenshot=FILE"); Chromium logs every console message to stderr as
// "...:CONSOLE:LINE] "message", source: ...".
BrowserRun chromium(const std::string& bin, const std::string& profile_dir, const std::string& mode,
                    const std::string& html_path) {
  const std::string cmd = "timeout 20 '" + bin +
                          "' --headless --no-sandbox --disable-gpu --no-first-run" +
                          " --enable-logging=stderr --v=0 --user-data-dir='" + profile_dir +
                          "' --window-size=1100,5200 " + mode + " 'file://" + html_path + "' 2>&1";
  BrowserRun r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) r.output.append(buf, n);
  const int status = ::pclose(p);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

bool has_console_message(const std::string& log) {
  return log.find(":CONSOLE") != std::string::npos;
}

void write_small_run(const TempDir& d) {
  std::string m;
  for (int s = 1; s <= 20; ++s)
    m += "{\"step\":" + std::to_string(s) + ",\"loss\":" + std::to_string(6.0 / (1 + 0.1 * s)) +
         ",\"lr\":0.001,\"tokens_per_s\":" + std::to_string(2000 + 30 * (s % 4)) +
         ",\"mfu\":0.35,\"step_ms\":120,\"data_wait_ms\":3,\"forward_ms\":40,\"backward_ms\":60,"
         "\"optimizer_ms\":9,\"comm_ms\":2,\"mem_in_use\":104857600,\"mem_peak\":157286400" +
         (s % 5 == 0 ? ",\"val_loss\":" + std::to_string(6.2 / (1 + 0.1 * s)) : std::string()) +
         (s == 10 ? ",\"ckpt_stall_ms\":30" : "") + "}\n";
  write_file(d / "metrics.jsonl", m);
  write_file(d / "config.toml", "[model]\nn_layer = 2\n");
  write_file(
      d / "events.jsonl",
      "{\"time\":\"t\",\"t_s\":1,\"event\":\"failure\",\"step\":12,\"message\":\"rank 1 died\"}\n");
  write_file(d / "kernels.json", R"([{"class":"matmul","flops":2e9,"bytes":1e7,"seconds":0.02}])");
  write_file(
      d / "scaling.json",
      R"({"points":[{"ranks":1,"speedup":1},{"ranks":4,"speedup":3.2}],"serial_fraction":0.05})");
}

TEST(ReportChromium, NoConsoleErrorsAndScreenshot) {
  const std::string bin = find_chromium();
  if (bin.empty())
    GTEST_SKIP()
        << "chromium-headless-shell not installed (apt-get install chromium-headless-shell)";
  TempDir d(testutil::current_test_name());

  // The check works: a deliberate console.error is seen.
  write_file(
      d / "scratch.html",
      "<!DOCTYPE "
      "html><html><body><script>console.error('deliberate-report-check')</script></body></html>");
  BrowserRun scratch = chromium(bin, d / "profile", "--dump-dom", d / "scratch.html");
  ASSERT_EQ(scratch.rc, 0) << scratch.output;
  ASSERT_TRUE(has_console_message(scratch.output)) << scratch.output;
  ASSERT_NE(scratch.output.find("deliberate-report-check"), std::string::npos) << scratch.output;

  write_small_run(d);
  ASSERT_TRUE(write_report(d.path()).is_ok());
  BrowserRun dom = chromium(bin, d / "profile", "--dump-dom", d / "report.html");
  ASSERT_EQ(dom.rc, 0) << dom.output;
  EXPECT_FALSE(has_console_message(dom.output)) << dom.output;
  // The browser built the charts: the DOM holds the svg elements and series.
  size_t svgs = 0;
  for (size_t p = dom.output.find("<svg"); p != std::string::npos;
       p = dom.output.find("<svg", p + 1))
    ++svgs;
  EXPECT_GE(svgs, 8u);
  EXPECT_NE(dom.output.find("data-series=\"train loss\""), std::string::npos);

  const std::string png = d / "report.png";
  BrowserRun shot = chromium(bin, d / "profile", "--screenshot=" + png, d / "report.html");
  ASSERT_EQ(shot.rc, 0) << shot.output;
  EXPECT_FALSE(has_console_message(shot.output)) << shot.output;
  const std::string bytes = testutil::read_file(png);
  ASSERT_GT(bytes.size(), 10000u);  // a page of charts, not a blank image
  EXPECT_EQ(bytes.substr(1, 3), "PNG");
  std::error_code ec;
  fs::copy_file(png, std::string(CRUCIBLE_BINARY_DIR) + "/report_screenshot.png",
                fs::copy_options::overwrite_existing, ec);
  EXPECT_FALSE(ec) << ec.message();
}

}  // namespace
}  // namespace crucible::profile
