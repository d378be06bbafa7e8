#include "profile/energy.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "core/file_io.h"
#include "kernels/cuda/cuda.h"

namespace crucible::profile {
namespace fs = std::filesystem;

// Outside the anonymous namespace: EnergyMeter::Impl (declared in the header)
// holds them.
struct RaplDomain {
  std::string dir, name;
  double range_uj = 0;  // the counter wraps here
  double last_uj = 0;   // the previous reading
  double total_uj = 0;  // joules since the meter was made, in µJ
};

namespace {

Result<double> read_number(const std::string& path) {
  auto text = read_file(path);
  if (!text)
    return Status::not_found("[energy] cannot read " + path + ": " + text.status().message());
  char* end = nullptr;
  const double v = std::strtod(text->c_str(), &end);
  if (end == text->c_str() || !(v >= 0))
    return Status::corrupt("[energy] " + path + " holds no counter: '" + *text + "'");
  return v;
}

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

std::string format_energy_per_token(double j) {
  char buf[32];
  if (j >= 1)
    std::snprintf(buf, sizeof buf, "%.2f J/tok", j);
  else
    std::snprintf(buf, sizeof buf, "%.3g mJ/tok", j * 1e3);
  return buf;
}

struct EnergyMeter::Impl {
  std::string source;
  std::vector<RaplDomain> rapl;   // a CPU meter
  std::optional<NvmlDevice> gpu;  // a GPU meter
  double gpu_start_j = 0;
};

EnergyMeter::EnergyMeter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
EnergyMeter::EnergyMeter(EnergyMeter&&) noexcept = default;
EnergyMeter& EnergyMeter::operator=(EnergyMeter&&) noexcept = default;
EnergyMeter::~EnergyMeter() = default;

Result<EnergyMeter> EnergyMeter::rapl(const std::string& root) {
  std::error_code ec;
  if (!fs::is_directory(root, ec))
    return Status::not_found("[energy] not measurable here: " + root +
                             " is absent (no powercap: RAPL hidden or unsupported)");
  auto impl = std::make_unique<Impl>();
  std::vector<std::string> dirs;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string n = e.path().filename().string();
    // Top-level domains only: "intel-rapl:0", not its "intel-rapl:0:1".
    if (n.rfind("intel-rapl:", 0) == 0 && std::count(n.begin(), n.end(), ':') == 1)
      dirs.push_back(e.path().string());
  }
  std::sort(dirs.begin(), dirs.end());
  for (const std::string& dir : dirs) {
    auto name = read_file(dir + "/name");
    if (!name || trimmed(*name).rfind("package", 0) != 0) continue;
    RaplDomain d;
    d.dir = dir;
    d.name = trimmed(*name);
    auto range = read_number(dir + "/max_energy_range_uj");
    if (!range) return range.status();
    auto now = read_number(dir + "/energy_uj");
    if (!now) return now.status();
    d.range_uj = *range;
    d.last_uj = *now;
    impl->rapl.push_back(d);
  }
  if (impl->rapl.empty())
    return Status::not_found("[energy] not measurable here: no RAPL package domain under " + root);
  impl->source = "RAPL";
  for (size_t i = 0; i < impl->rapl.size(); ++i)
    impl->source += (i ? " + " : " ") + impl->rapl[i].name;
  return EnergyMeter(std::move(impl));
}

Result<EnergyMeter> EnergyMeter::gpu(const std::string& pci_bus_id, const std::string& label) {
  auto dev = NvmlDevice::open(pci_bus_id);
  if (!dev) return dev.status();
  auto start = dev->energy_j();
  if (!start) return start.status();
  auto impl = std::make_unique<Impl>();
  impl->source = "NVML " + label;
  impl->gpu = std::move(*dev);
  impl->gpu_start_j = *start;
  return EnergyMeter(std::move(impl));
}

Result<EnergyMeter> EnergyMeter::for_device(const Device& d) {
  if (d.is_cpu()) {
    const char* root = std::getenv("CRUCIBLE_POWERCAP_ROOT");
    return rapl(root && *root ? root : "/sys/class/powercap");
  }
  auto info = kernels::cuda::device_info(d.index);
  if (!info) return info.status();
  return gpu(info->pci_bus_id, d.str() + " (" + info->name + ")");
}

const std::string& EnergyMeter::source() const { return impl_->source; }

Result<double> EnergyMeter::joules() {
  if (impl_->gpu) {
    auto j = impl_->gpu->energy_j();
    if (!j) return j.status();
    return *j - impl_->gpu_start_j;
  }
  double total = 0;
  for (RaplDomain& d : impl_->rapl) {
    auto now = read_number(d.dir + "/energy_uj");
    if (!now) return now.status();
    // Below the last reading: the counter wrapped once at its range.
    d.total_uj += *now >= d.last_uj ? *now - d.last_uj : *now + d.range_uj - d.last_uj;
    d.last_uj = *now;
    total += d.total_uj;
  }
  return total * 1e-6;
}

std::optional<NvmlSample> EnergyMeter::gpu_sample() const {
  if (!impl_->gpu) return std::nullopt;
  return impl_->gpu->sample();
}

}  // namespace crucible::profile
