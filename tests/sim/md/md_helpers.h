// Helpers of the md workload's tests: run a workload for a number of steps,
// save and load its State, compare States bit for bit.
#pragma once
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>

#include "comm/comm.h"
#include "sim/md/md.h"

namespace crucible::sim::mdtest {

// A small fluid that runs in well under a second: 256 atoms at T* 2, rho* 0.8.
inline MdConfig small_config() {
  MdConfig c;
  c.cells = 4;
  c.steps = 200;
  c.equil_steps = 50;
  c.thermo_every = 5;
  return c;
}

inline std::unique_ptr<Workload> make(const MdConfig& c, comm::Comm& comm, uint64_t seed = 7) {
  auto w = make_md_workload(c, comm, seed);
  EXPECT_TRUE(w.is_ok()) << w.status().message();
  return w.is_ok() ? std::move(w.value()) : nullptr;
}

// Steps until steps_done() == until; the first failure is returned.
inline Status run_to(Workload& w, int64_t until) {
  while (w.steps_done() < until) CRUCIBLE_RETURN_IF_ERROR(w.step());
  return Status::ok();
}

// Arrays of two States equal byte for byte (names, shapes, bytes).
inline ::testing::AssertionResult same_state(const State& a, const State& b) {
  if (a.arrays.size() != b.arrays.size())
    return ::testing::AssertionFailure() << "array counts differ";
  for (const StateArray& x : a.arrays) {
    const StateArray* y = b.find(x.name);
    if (!y) return ::testing::AssertionFailure() << "missing array " << x.name;
    if (x.shape != y->shape) return ::testing::AssertionFailure() << x.name << ": shapes differ";
    if (x.bytes != y->bytes) {
      size_t first = 0;
      while (first < x.bytes.size() && x.bytes[first] == y->bytes[first]) ++first;
      return ::testing::AssertionFailure() << x.name << ": bytes differ from byte " << first;
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace crucible::sim::mdtest
