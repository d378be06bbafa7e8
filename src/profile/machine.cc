#include "profile/machine.h"

#include <sys/utsname.h>
#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "core/hash.h"
#include "core/process.h"
#include "core/threads.h"

namespace crucible::profile {

using nlohmann::json;

namespace {

// The flags that change which kernels run or what the ceilings are.
constexpr const char* kFlagsThatMatter[] = {"avx2",        "fma",      "avx512f",  "avx512_bf16",
                                            "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8"};

std::string field(const std::string& line) {
  const auto colon = line.find(':');
  if (colon == std::string::npos) return "";
  size_t b = colon + 1;
  while (b < line.size() && line[b] == ' ') ++b;
  return line.substr(b);
}

// Seconds since the epoch of "YYYY-MM-DDTHH:MM:SSZ"; NaN when malformed.
double parse_utc(const std::string& s) {
  std::tm tm{};
  std::istringstream in(s);
  in >> std::get_time(&tm, "%Y-%m-%dT%H:%M:%SZ");
  if (in.fail()) return NAN;
  return double(timegm(&tm));
}

}  // namespace

json machine_identity() {
  json id = {{"vendor", ""}, {"model_name", ""}, {"family", -1}, {"model", -1}, {"stepping", -1}};
  std::string flags_line;
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.empty()) break;  // the first processor's block is enough
    auto starts = [&](const char* k) { return line.rfind(k, 0) == 0; };
    if (starts("vendor_id")) id["vendor"] = field(line);
    else if (starts("model name")) id["model_name"] = field(line);
    else if (starts("cpu family")) id["family"] = std::atoi(field(line).c_str());
    else if (starts("model\t") || starts("model ")) id["model"] = std::atoi(field(line).c_str());
    else if (starts("stepping")) id["stepping"] = std::atoi(field(line).c_str());
    else if (starts("flags")) flags_line = " " + field(line) + " ";
  }
  json flags = json::array();
  for (const char* f : kFlagsThatMatter)
    if (flags_line.find(std::string(" ") + f + " ") != std::string::npos) flags.push_back(f);
  id["flags"] = flags;
  id["hardware_threads"] = hardware_threads();
  uint64_t mem_kb = 0;
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);)
    if (line.rfind("MemTotal:", 0) == 0) {
      mem_kb = std::strtoull(field(line).c_str(), nullptr, 10);
      break;
    }
  id["memory_bytes"] = mem_kb * 1024;
  id["hostname"] = host_name();
  utsname u{};
  ::uname(&u);
  id["kernel"] = std::string(u.sysname) + " " + u.release;
  id["fingerprint"] = machine_fingerprint(id);
  return id;
}

std::string machine_fingerprint(const json& id) {
  // Memory in whole GiB: the kernel's MemTotal moves by a few pages between
  // boots of the same machine.
  const double gib = std::round(id.value("memory_bytes", 0.0) / double(1ull << 30));
  std::string key;
  for (const char* k : {"vendor", "model_name", "hostname"}) key += id.value(k, std::string()) + "|";
  for (const char* k : {"family", "model", "stepping", "hardware_threads"}) key += std::to_string(id.value(k, -1)) + "|";
  key += std::to_string(int64_t(gib)) + "|" + id.value("flags", json::array()).dump();
  return hex64(XXH64(key.data(), key.size(), 0));
}

std::string describe_machine(const json& id) {
  if (!id.is_object()) return "an unrecorded machine";
  return "host " + id.value("hostname", std::string("?")) + ", " + id.value("model_name", std::string("?")) +
         " (family " + std::to_string(id.value("family", -1)) + " model " + std::to_string(id.value("model", -1)) +
         "), " + std::to_string(id.value("hardware_threads", 0)) + " threads";
}

Status probe_made_here(const json& probe, const json& here, double max_age_days) {
  const json* made = probe.is_object() && probe.contains("machine") ? &probe["machine"] : nullptr;
  if (!made || !made->is_object() || !(*made).contains("fingerprint") || !(*made)["fingerprint"].is_string())
    return Status::invalid("it records no machine (written before crucible recorded one)");
  if ((*made)["fingerprint"] != here.value("fingerprint", std::string()))
    return Status::invalid("it was made on another machine (" + describe_machine(*made) + "; this is " +
                           describe_machine(here) + ")");
  const double created = parse_utc(probe.value("created", std::string()));
  if (!std::isfinite(created)) return Status::invalid("its \"created\" time is unreadable");
  const double age_days = (double(std::time(nullptr)) - created) / 86400;
  if (age_days > max_age_days) {
    char b[128];
    std::snprintf(b, sizeof b, "it is %.0f days old (run.probe_max_age_days = %g)", age_days, max_age_days);
    return Status::invalid(b);
  }
  return Status::ok();
}

}  // namespace crucible::profile
