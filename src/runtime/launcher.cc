#include "runtime/launcher.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "core/file_io.h"
#include "core/threads.h"

namespace crucible::runtime {

std::vector<std::string> hostfile_hosts(const std::string& path) {
  std::vector<std::string> hosts;
  auto text = read_file(path);
  if (!text) return hosts;
  std::istringstream in(*text);
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line.substr(0, line.find('#')));
    std::string host;
    if (words >> host) hosts.push_back(host);
  }
  return hosts;
}

std::string address_facing(const std::vector<std::string>& hosts) {
  for (const std::string& host : hosts) {
    addrinfo hints{}, *res = nullptr;
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_DGRAM;
    if (::getaddrinfo(host.c_str(), "9", &hints, &res) != 0 || !res) continue;
    std::string found;
    const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    // A UDP connect sends nothing: it only picks the route and its source address.
    if (fd >= 0 && ::connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
      sockaddr_in local{};
      socklen_t len = sizeof local;
      char buf[INET_ADDRSTRLEN] = {0};
      const auto* remote = reinterpret_cast<const sockaddr_in*>(res->ai_addr);
      if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0 &&
          local.sin_addr.s_addr != remote->sin_addr.s_addr &&            // the host is not this machine
          (ntohl(remote->sin_addr.s_addr) >> 24) != 127 &&                // nor a loopback name of it
          ::inet_ntop(AF_INET, &local.sin_addr, buf, sizeof buf))
        found = buf;
    }
    if (fd >= 0) ::close(fd);
    ::freeaddrinfo(res);
    if (!found.empty()) return found;
  }
  return "";
}

namespace {

// The IPv4 addresses `host` resolves to, as text.
std::vector<std::string> addresses_of(const std::string& host) {
  std::vector<std::string> out;
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0) return out;
  for (addrinfo* a = res; a; a = a->ai_next) {
    char buf[INET_ADDRSTRLEN] = {0};
    if (::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr, buf, sizeof buf))
      out.push_back(buf);
  }
  ::freeaddrinfo(res);
  return out;
}

}  // namespace

Result<int> write_hostfile_without(const std::string& from, const std::vector<std::string>& drop,
                                   const std::string& to) {
  auto text = read_file(from);
  if (!text) return text.status();
  std::istringstream in(*text);
  std::string kept;
  int slots = 0;
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line.substr(0, line.find('#')));
    std::string host, word;
    if (!(words >> host)) continue;
    bool gone = std::find(drop.begin(), drop.end(), host) != drop.end();
    for (const std::string& a : addresses_of(host)) gone = gone || std::find(drop.begin(), drop.end(), a) != drop.end();
    if (gone) continue;
    kept += line + "\n";
    int n = -1;
    while (words >> word)
      if (word.rfind("slots=", 0) == 0) n = std::stoi(word.substr(6));
    slots = slots < 0 || n < 0 ? -1 : slots + n;
  }
  CRUCIBLE_RETURN_IF_ERROR(write_file_atomic(to, kept));
  return slots;
}

Status check_hostfile(const std::string& path, int ranks) {
  auto text = read_file(path);
  if (!text) return Status::invalid("[launch] --hostfile " + text.status().message());
  std::istringstream in(*text);
  int hosts = 0, line_no = 0;
  int64_t slots = 0;
  bool all_counted = true;  // a host without slots= gets its core count from Open MPI
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    line = line.substr(0, line.find('#'));
    std::istringstream words(line);
    std::string host, word;
    if (!(words >> host)) continue;
    ++hosts;
    bool counted = false;
    while (words >> word) {
      const size_t eq = word.find('=');
      const std::string key = word.substr(0, eq);
      if (eq == std::string::npos || (key != "slots" && key != "max_slots" && key != "max-slots"))
        return Status::invalid("[launch] " + path + ":" + std::to_string(line_no) + ": '" + word +
                               "' is not slots=N or max_slots=N");
      const std::string v = word.substr(eq + 1);
      if (v.empty() || v.size() > 6 || v.find_first_not_of("0123456789") != std::string::npos ||
          std::stoi(v) < 1)
        return Status::invalid("[launch] " + path + ":" + std::to_string(line_no) + ": " + key +
                               " must be a positive integer, got '" + v + "'");
      if (key == "slots") {
        slots += std::stoi(v);
        counted = true;
      }
    }
    all_counted = all_counted && counted;
  }
  if (hosts == 0) return Status::invalid("[launch] " + path + " names no host");
  if (all_counted && slots < ranks)
    return Status::invalid("[launch] " + path + " has " + std::to_string(slots) + " slot(s) for " +
                           std::to_string(ranks) + " ranks (-n); add slots or lower -n");
  return Status::ok();
}

std::vector<std::string> launcher_command(const LaunchSpec& o, const std::string& self,
                                          const std::vector<std::string>& command) {
  const bool slurm = std::getenv("SLURM_JOB_ID") != nullptr;
  const int threads = o.threads > 0        ? o.threads
                      : o.hostfile.empty() ? std::max(1, hardware_threads() / o.ranks)
                                           : 0;
  std::vector<std::string> argv;
  if (slurm) {
    argv = {"srun", "-n", std::to_string(o.ranks)};
    // Open MPI's ranks meet through PMIx; SLURM_MPI_TYPE chooses otherwise.
    if (!std::getenv("SLURM_MPI_TYPE")) argv.push_back("--mpi=pmix");
    if (threads > 0) argv.push_back("--cpus-per-task=" + std::to_string(threads));
  } else {
    argv = {"mpirun", "-n", std::to_string(o.ranks)};
    if (::geteuid() == 0) argv.push_back("--allow-run-as-root");
    if (o.hostfile.empty()) {
      if (o.ranks > hardware_threads()) argv.push_back("--oversubscribe");
      // One machine: shared memory and self only, bind nothing (threads are
      // set per rank below; binding N ranks to cores fights OpenMP).
      for (const char* a : {"--mca", "btl", "self,vader", "--bind-to", "none"}) argv.push_back(a);
    } else {
      // Several hosts: TCP between them, shared memory inside each (unless
      // the environment chose the transports), and no binding, as above.
      argv.insert(argv.end(), {"--hostfile", o.hostfile, "--bind-to", "none"});
      if (!std::getenv("OMPI_MCA_btl")) argv.insert(argv.end(), {"--mca", "btl", "self,vader,tcp"});
    }
  }
  std::vector<std::string> forward = o.env_to_forward;
  if (threads > 0) {
    ::setenv("OMP_NUM_THREADS", std::to_string(threads).c_str(), 1);
    forward.push_back("OMP_NUM_THREADS");
  }
  if (!slurm)  // srun passes the whole environment by default
    for (const auto& v : forward) argv.insert(argv.end(), {"-x", v});
  argv.push_back(self);
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

}  // namespace crucible::runtime
