#include <gtest/gtest.h>
#include <chrono>
#include "md_helpers.h"
#include "support/files.h"
namespace crucible::sim {
TEST(MdScratch, Default) {
  MdConfig c;
  auto comm = comm::make_single_comm();
  testutil::TempDir d("scratch");
  auto t0 = std::chrono::steady_clock::now();
  auto w = mdtest::make(c, *comm, 1234);
  ASSERT_TRUE(w->begin(d.path()).is_ok());
  ASSERT_TRUE(mdtest::run_to(*w, c.steps).is_ok());
  auto r = w->finish(d.path());
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%.2f s\n%s\n%s\n", secs, r->dump(1).c_str(), w->progress().c_str());
  std::system(("ls -la " + d.path()).c_str());
}
}
