// The device seam's host logic (kernels/device_scope.h, kernels/step_graph.h),
// which needs no GPU: which stream a nested scope runs on, and where a step
// can be captured as a CUDA graph.
#include "kernels/device_scope.h"

#include <gtest/gtest.h>

#include "kernels/cuda/cuda.h"
#include "kernels/step_graph.h"

namespace crucible {
namespace {

// A stream handle is an opaque pointer the scope only carries: stand-ins do.
CUstream_st* fake_stream(uintptr_t n) { return reinterpret_cast<CUstream_st*>(n); }

TEST(DeviceScope, ANestedScopeOfTheSameDeviceKeepsItsStream) {
  EXPECT_TRUE(kernels::current_target().device.is_cpu());
  {
    kernels::DeviceScope step(Device::cuda(0), fake_stream(0x100));
    {
      // What ParamRegistry and the copies open inside a step: the step's
      // stream, not the legacy one (a captured graph would be broken by it).
      kernels::DeviceScope inner(Device::cuda(0));
      EXPECT_EQ(kernels::current_target().stream, fake_stream(0x100));
      {
        kernels::DeviceScope other(Device::cuda(1));
        EXPECT_EQ(kernels::current_target().device, Device::cuda(1));
        EXPECT_EQ(kernels::current_target().stream, nullptr);
      }
      kernels::DeviceScope host(Device::cpu());
      EXPECT_TRUE(kernels::current_target().device.is_cpu());
      EXPECT_EQ(kernels::current_target().stream, nullptr);
    }
    kernels::DeviceScope chosen(Device::cuda(0), fake_stream(0x200));
    EXPECT_EQ(kernels::current_target().stream, fake_stream(0x200));
  }
  EXPECT_TRUE(kernels::current_target().device.is_cpu());
  EXPECT_EQ(kernels::current_target().stream, nullptr);
}

TEST(StepGraph, OnlyAGpuStepIsCaptured) {
  EXPECT_FALSE(kernels::StepGraph::available(Device::cpu()));
  EXPECT_EQ(kernels::StepGraph::available(Device::cuda(0)), kernels::cuda::compiled());
}

}  // namespace
}  // namespace crucible
