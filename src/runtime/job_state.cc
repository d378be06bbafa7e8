#include "runtime/job_state.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/file_io.h"
#include "core/json_io.h"
#include "runtime/run_dir.h"

namespace crucible::runtime {

namespace fs = std::filesystem;

JobState read_job_state(const std::string& run_dir) {
  JobState s;
  auto j = read_json(run_dir + "/job.json");
  if (!j || !j->is_object()) return s;
  s.state = json_string_or(*j, "state", "");
  s.attempt = int(json_int_or(*j, "attempt", -1));
  s.world = int(json_int_or(*j, "world", 0));
  s.full_world = int(json_int_or(*j, "full_world", s.world));
  s.pid = int(json_int_or(*j, "pid", 0));
  return s;
}

void write_job_state(const std::string& run_dir, const JobState& s) {
  const nlohmann::json j = {{"state", s.state},
                            {"attempt", s.attempt},
                            {"world", s.world},
                            {"full_world", s.full_world},
                            {"pid", s.pid}};
  Status st = write_file_atomic(run_dir + "/job.json", j.dump(2) + "\n");
  if (!st.is_ok()) std::fprintf(stderr, "[supervisor] warning: %s\n", st.message().c_str());
}

std::string newest_unfinished_run(const std::string& name) {
  std::vector<std::string> dirs;
  std::error_code ec;
  for (auto it = fs::directory_iterator("runs", ec); !ec && it != fs::end(it); it.increment(ec)) {
    const std::string base = it->path().filename().string();
    if (base.rfind(name + "-", 0) != 0 || !has_checkpoints(it->path().string())) continue;
    const JobState s = read_job_state(it->path().string());
    if (!s.state.empty() && s.state != "finished") dirs.push_back(it->path().string());
  }
  std::sort(dirs.begin(), dirs.end());
  return dirs.empty() ? "" : dirs.back();
}

}  // namespace crucible::runtime
