#include "support/hf_venv.h"

#include <sys/wait.h>

#include <cstdio>
#include <mutex>

namespace crucible::testutil {
namespace {

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

int run(const std::string& cmd, std::string* out) {
  out->clear();
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out->append(buf, n);
  const int st = ::pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

}  // namespace

std::string hf_python(std::string* why) {
  static std::once_flag once;
  static std::string python, reason;
  std::call_once(once, [] {
    const std::string venv = CRUCIBLE_BINARY_DIR "/hf-venv";
    std::string out;
    if (run("bash " CRUCIBLE_SOURCE_DIR "/tests/hf/hf_venv.sh " + quote(venv), &out) == 0)
      python = venv + "/bin/python";
    else
      reason = "no Hugging Face test environment: " + out;
  });
  if (python.empty()) *why = reason;
  return python;
}

int run_python(const std::string& python, const std::string& script,
               const std::vector<std::string>& args, std::string* out) {
  std::string cmd = quote(python) + " " + quote(script);
  for (const auto& a : args) cmd += " " + quote(a);
  return run(cmd, out);
}

int run_hf_side(const std::string& python, const std::vector<std::string>& args, std::string* out) {
  return run_python(python, CRUCIBLE_SOURCE_DIR "/tests/hf/hf_side.py", args, out);
}

}  // namespace crucible::testutil
