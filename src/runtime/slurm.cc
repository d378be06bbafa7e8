#include "runtime/slurm.h"

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <sstream>

namespace crucible::runtime {

namespace {

// Seconds since the epoch of Slurm's local "YYYY-MM-DDTHH:MM:SS"; -1 when it is
// not one (Slurm writes "Unknown" or "None" for times it does not have).
double epoch_of(const std::string& t) {
  std::tm tm{};
  const char* end = ::strptime(t.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (!end || *end) return -1;
  tm.tm_isdst = -1;
  return double(std::mktime(&tm));
}

}  // namespace

SlurmJob parse_scontrol_job(const std::string& line) {
  SlurmJob j;
  std::istringstream words(line);
  for (std::string w; words >> w;) {
    const size_t eq = w.find('=');
    if (eq == std::string::npos) continue;
    const std::string k = w.substr(0, eq), v = w.substr(eq + 1);
    if (k == "JobId") j.id = v;
    else if (k == "SubmitTime") j.submit = v;
    else if (k == "EligibleTime") j.eligible = v;
    else if (k == "StartTime") j.start = v;
    else if (k == "Reason") j.reason = v;
    else if (k == "Restarts" || k == "RestartCnt") j.restarts = std::atoi(v.c_str());
  }
  // Slurm sets SubmitTime again when it requeues a job, so this is the wait
  // of this start (a requeued job is held until EligibleTime, within it).
  const double from = epoch_of(j.submit);
  const double start = epoch_of(j.start);
  if (from >= 0 && start >= from) j.wait_s = start - from;
  return j;
}

std::string slurm_job_id() {
  const char* id = std::getenv("SLURM_JOB_ID");
  if (!id || !*id || std::string(id).find_first_not_of("0123456789") != std::string::npos) return "";
  return id;
}

std::optional<SlurmJob> current_slurm_job() {
  const std::string id = slurm_job_id();
  if (id.empty()) return std::nullopt;
  const std::string cmd = "scontrol show job -o " + id + " 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return std::nullopt;
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  if (::pclose(p) != 0 || out.empty()) return std::nullopt;
  SlurmJob j = parse_scontrol_job(out);
  if (j.id.empty()) return std::nullopt;
  return j;
}

}  // namespace crucible::runtime
