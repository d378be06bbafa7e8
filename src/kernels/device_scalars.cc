#include "kernels/device_scalars.h"

#include "kernels/device_scope.h"

namespace crucible::kernels {

DeviceScalars::DeviceScalars(Device device)
    : device_(device),
      buf_(Tensor::empty(Shape{int64_t(sizeof(StepScalars) / sizeof(float))}, DType::f32,
                         "step.scalars", device)) {
  write(StepScalars{});
}

void DeviceScalars::write(const StepScalars& host) {
  staged_ = host;
  copy_async(device_, buf_.data(), &staged_, sizeof staged_);
}

StepScalars DeviceScalars::read() const {
  StepScalars out;
  copy_and_wait(device_, &out, buf_.data(), sizeof out);
  return out;
}

}  // namespace crucible::kernels
