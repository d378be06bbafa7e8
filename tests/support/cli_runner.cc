#include "support/cli_runner.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

namespace crucible::e2e {

namespace {
// The crucible under test: this build's, or $CRUCIBLE_BIN (the GPU machine
// runs a packed copy, scripts/gpu_check.sh).
std::string crucible_binary() {
  if (const char* b = std::getenv("CRUCIBLE_BIN"); b && *b) return b;
  return std::string(CRUCIBLE_BINARY_DIR) + "/crucible";
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}
}  // namespace

CliResult run_crucible(const std::vector<std::string>& args, const std::string& cwd) {
  std::string cmd = "cd " + shell_quote(cwd) + " && exec " + shell_quote(crucible_binary());
  for (const auto& a : args) cmd += " " + shell_quote(a);
  cmd += " 2>&1";
  CliResult r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

Background::Background(const std::vector<std::string>& args, const std::string& cwd,
                       std::string log_path)
    : log(std::move(log_path)) {
  pid = ::fork();
  if (pid == 0) {
    if (::chdir(cwd.c_str()) != 0) ::_exit(126);
    FILE* f = std::freopen(log.c_str(), "w", stdout);
    if (!f || ::dup2(::fileno(stdout), 2) < 0) ::_exit(126);
    std::vector<std::string> argv = {crucible_binary()};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> c;
    for (auto& a : argv) c.push_back(a.data());
    c.push_back(nullptr);
    ::execv(c[0], c.data());
    ::_exit(127);
  }
}

int Background::wait() {
  int st = 0;
  ::waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int Background::wait_for(double timeout_s) {
  int st = 0;
  const bool done = poll_until([&] { return ::waitpid(pid, &st, WNOHANG) == pid; }, timeout_s);
  if (!done) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &st, 0);
    return -1;
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

std::vector<nlohmann::json> metric_rows(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

std::map<int64_t, double> step_losses(const std::string& run) {
  std::map<int64_t, double> out;
  for (const nlohmann::json& r : metric_rows(run + "/metrics.jsonl"))
    if (r.contains("loss")) out[r.value("step", int64_t(0))] = r["loss"].get<double>();
  return out;
}

std::vector<std::string> launch_train(int ranks, const std::vector<std::string>& train_args) {
  ::setenv("ASAN_OPTIONS", "detect_leaks=0", 1);
  std::vector<std::string> args = {"launch", "-n",   std::to_string(ranks), "--threads", "1",
                                   "--",     "train"};
  args.insert(args.end(), train_args.begin(), train_args.end());
  return args;
}

std::vector<std::string> train_command(int ranks, const std::vector<std::string>& train_args) {
  if (ranks > 1) return launch_train(ranks, train_args);
  std::vector<std::string> args = {"train"};
  args.insert(args.end(), train_args.begin(), train_args.end());
  return args;
}

std::vector<int64_t> metric_steps(const std::string& run) {
  std::vector<int64_t> out;
  for (const auto& row : metric_rows(run + "/metrics.jsonl"))
    out.push_back(row["step"].get<int64_t>());
  return out;
}

std::string export_weights(const std::string& run, int64_t step) {
  const std::string out = run + "/export_" + std::to_string(step) + ".safetensors";
  auto r = run_crucible({"export", run, "--step", std::to_string(step), "-o", out});
  if (r.code != 0 || read_file(out).empty()) {
    ADD_FAILURE() << "crucible export " << run << " --step " << step << " failed:\n" << r.output;
    return "";
  }
  return out;
}

size_t count_lines(const std::string& path) {
  std::ifstream in(path);
  size_t n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

bool poll_until(const std::function<bool()>& done, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

}  // namespace crucible::e2e
