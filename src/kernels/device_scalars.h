// One StepScalars (kernels/step_scalars.h) in a device's memory, and the two
// crossings a step makes with it: the host's values in at the step's start,
// the kernels' results back at its end. On the CPU the "device" copy is host
// memory and both crossings are plain copies.
#pragma once
#include "core/device.h"
#include "core/tensor.h"
#include "kernels/step_scalars.h"

namespace crucible::kernels {

class DeviceScalars {
 public:
  explicit DeviceScalars(Device device);
  // Where the step's kernels read and write them.
  StepScalars* get() { return static_cast<StepScalars*>(buf_.data()); }
  // The host's values in, on the calling thread's stream (not waited for).
  void write(const StepScalars& host);
  // The kernels' values back: waits for everything before it on the stream.
  StepScalars read() const;

 private:
  Device device_;
  Tensor buf_;
  StepScalars staged_;  // write's source, alive while an asynchronous copy reads it
};

}  // namespace crucible::kernels
