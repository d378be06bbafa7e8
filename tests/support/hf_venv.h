// The Python side of the Hugging Face interchange and serving tests (tests/hf,
// tests/serve): a virtual environment with transformers, tokenizers and the
// openai client over Debian's torch, made once per build directory by
// tests/hf/hf_venv.sh, and the tests' scripts run in it.
#pragma once
#include <string>
#include <vector>

namespace crucible::testutil {

// The venv's python, or "" with *why set when it cannot be made here (the
// caller then GTEST_SKIPs: offline, no python3-torch).
std::string hf_python(std::string* why);

// Runs `python tests/hf/hf_side.py ARGS...`; its exit code, output in *out.
int run_hf_side(const std::string& python, const std::vector<std::string>& args, std::string* out);
// Runs `python SCRIPT ARGS...`; its exit code, output (stdout and stderr) in *out.
int run_python(const std::string& python, const std::string& script,
               const std::vector<std::string>& args, std::string* out);

}  // namespace crucible::testutil
