#include "runtime/step_energy.h"

namespace crucible::runtime {

Status StepEnergy::open(comm::Comm& comm, const Device& device, std::string* note) {
  const int W = comm.size(), rank = comm.rank();
  bool owner = true;  // a GPU rank owns its board (one rank per GPU: runtime/device_check.h)
  if (device.is_cpu() && W > 1) {
    auto hosts = host_names(comm);
    if (!hosts) return hosts.status();
    for (int r = 0; r < rank; ++r) owner &= (*hosts)[r] != (*hosts)[rank];
  }
  std::string why;
  if (owner) {
    auto m = profile::EnergyMeter::for_device(device);
    if (m)
      meter_ = std::move(*m);
    else
      why = m.status().message();
  }
  // Measurable only if every owner has its counter.
  double missing = owner && !meter_ ? 1 : 0;
  if (W > 1) CRUCIBLE_RETURN_IF_ERROR(comm.allreduce(&missing, 1, comm::ReduceOp::kSum));
  measurable_ = missing == 0;
  if (note) {
    if (measurable_)
      *note =
          "[energy] measuring " + (meter_ ? meter_->source() : std::string("each host's counter")) +
          (W > 1
               ? " (summed over the job's " + std::string(device.is_cpu() ? "hosts" : "GPUs") + ")"
               : "");
    else if (!why.empty())
      *note = why + "; no energy is recorded";
    else
      *note = "[energy] not measurable on " + std::to_string(int(missing)) +
              " host(s) of the job; no energy is recorded";
  }
  return Status::ok();
}

void StepEnergy::begin() {
  if (!measurable_ || !meter_) return;
  auto j = meter_->joules();
  if (j) at_begin_ = *j;
}

Status StepEnergy::end(comm::Comm& comm, double tokens, StepMetrics& m) {
  if (!measurable_) return Status::ok();
  // [0]: this rank's joules over the step; [1]: a counter failed to read.
  double v[2] = {0, 0};
  if (meter_) {
    auto j = meter_->joules();
    if (j)
      v[0] = *j - at_begin_;
    else
      v[1] = 1;
    if (auto g = meter_->gpu_sample()) {
      m.gpu_power_w = g->power_w;
      m.gpu_sm_clock_mhz = g->sm_clock_mhz;
      m.gpu_temp_c = g->temperature_c;
      m.gpu_throttle = int64_t(g->throttle);
    }
  }
  if (comm.size() > 1) CRUCIBLE_RETURN_IF_ERROR(comm.allreduce(v, 2, comm::ReduceOp::kSum));
  if (v[1] > 0 || m.step_ms <= 0) return Status::ok();  // this step's energy unknown
  m.energy_j = v[0];
  m.power_w = v[0] / (m.step_ms * 1e-3);
  m.j_per_token = tokens > 0 ? v[0] / tokens : -1;
  return Status::ok();
}

}  // namespace crucible::runtime
