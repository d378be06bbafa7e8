// `crucible probe [--quick] [--json FILE] [--dir D]... [--sections a,b]`
// and `crucible probe --compare A.json B.json` (profile/probe.h).
#include <cstdio>
#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/file_io.h"
#include "core/json_io.h"
#include "comm/comm.h"
#include "profile/probe.h"

namespace crucible::cli {

namespace {

struct ProbeCli {
  profile::ProbeOptions opt;
  std::string json_path = "probe.json";
  std::string sections;  // --sections' text: "compute,memory"
  bool has_sections = false;
  std::vector<std::string> compare;
};

// compare_probes checks each document (profile/probe_schema.h).

// --sections' list: comma-separated names, each known and none empty (",",
// "compute,,memory" and "" are typos to name, not lists to shorten).
std::vector<std::string> parse_sections(const std::string& text) {
  const char* known = "compute, memory, throttle, topology, storage, gpu, interconnect";
  std::vector<std::string> out;
  for (size_t at = 0;;) {
    const size_t comma = text.find(',', at);
    const std::string s =
        text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    if (s.empty())
      throw ExitError(
          2, "[probe] --sections '" + text + "': an empty section name (sections: " + known + ")");
    if (s != "compute" && s != "memory" && s != "throttle" && s != "topology" && s != "storage" &&
        s != "gpu" && s != "interconnect")
      throw ExitError(2, "[probe] --sections: unknown section '" + s + "' (" + known + ")");
    out.push_back(s);
    if (comma == std::string::npos) return out;
    at = comma + 1;
  }
}

nlohmann::json read_probe(const std::string& path) {
  auto j = read_json(path);
  if (!j) throw ExitError(2, "[probe] " + j.status().message());
  return *j;
}

void run(const ProbeCli& c) {
  if (!c.compare.empty()) {
    if (c.compare.size() != 2) throw ExitError(2, "[probe] --compare takes two probe.json files");
    auto table = profile::compare_probes(read_probe(c.compare[0]), read_probe(c.compare[1]),
                                         std::filesystem::path(c.compare[0]).filename().string(),
                                         std::filesystem::path(c.compare[1]).filename().string());
    if (!table) throw ExitError(2, table.status().message());
    std::printf("%s", table->c_str());
    return;
  }
  profile::ProbeOptions opt = c.opt;
  if (c.has_sections) opt.sections = parse_sections(c.sections);
  // Judge the arguments before the minutes of measuring: a directory that
  // does not exist, a result that cannot be written.
  for (const std::string& d : c.opt.storage_dirs)
    if (!std::filesystem::is_directory(d))
      throw ExitError(2, "[probe] --dir " + d + ": not a directory");
  if (Status s = check_output_path(c.json_path, "[probe] --json"); !s)
    throw ExitError(2, s.message());
  {  // the way the result will be written: a file created next to it
    const std::string probe_file = c.json_path + ".writable." + std::to_string(::getpid());
    const int fd = ::open(probe_file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) throw ExitError(2, "[probe] --json " + c.json_path + ": cannot be written (" + errno_str() + ")");
    ::close(fd);
    ::unlink(probe_file.c_str());
  }
  opt.log = [](const std::string& m) {
    std::fprintf(stderr, "%s\n", m.c_str());
    std::fflush(stderr);
  };
  auto doc = profile::run_probe(opt);
  if (!doc) throw ExitError(exit_code(doc.status()), doc.status().message());
  auto world = comm::world();
  if (world && (*world)->rank() != 0) return;
  std::printf("%s", profile::probe_table(*doc).c_str());
  Status s = write_file_atomic(c.json_path, doc->dump(2) + "\n");
  if (!s.is_ok()) throw ExitError(1, s.message());
  std::printf("\nwritten: %s\n", c.json_path.c_str());
}

}  // namespace

void add_probe_command(CLI::App& app) {
  auto c = std::make_shared<ProbeCli>();
  auto* cmd = app.add_subcommand(
      "probe",
      "Measure the hardware: GEMM per dtype vs FMA peak, memory bandwidth, throttling, "
      "topology, storage, and (under launch -n N) the interconnect; writes probe.json");
  cmd->add_flag("--quick", c->opt.quick, "Under 30 s: fewer shapes, smaller buffers, 3 s of load");
  cmd->add_option("--json", c->json_path, "Where to write the results")->capture_default_str();
  cmd->add_option("--dir", c->opt.storage_dirs,
                  "Directory whose file system to measure (repeatable; default: runs/ and data/)");
  cmd->add_option("--throttle-s", c->opt.throttle_s, "Seconds of sustained load (default 20, quick 3)")
      ->check(positive());
  auto* sections =
      cmd->add_option("--sections", c->sections,
                      "Only these sections: compute,memory,throttle,topology,storage,interconnect");
  cmd->add_option("--compare", c->compare, "Show two probe.json files side by side: A B")
      ->expected(2);
  cmd->callback([c, sections] {
    c->has_sections = sections->count() > 0;
    run(*c);
  });
}

}  // namespace crucible::cli
