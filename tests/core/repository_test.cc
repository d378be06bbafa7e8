// The repository tracks no file that crucible generates where it runs: a
// probe.json from another machine was once committed at the root, and every
// run in a checkout trusted it (+48% predicted step time). Fixtures of such
// files live under tests/**/data/ and fuzz/corpus/, named for what they are.
#include <gtest/gtest.h>

#include <cstdio>
#include <regex>
#include <string>
#include <vector>

namespace {

std::vector<std::string> tracked_files(const std::string& root) {
  std::vector<std::string> out;
  const std::string cmd = "git -C '" + root + "' ls-files 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return out;
  char line[4096];
  while (std::fgets(line, sizeof line, p)) {
    std::string s(line);
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    out.push_back(s);
  }
  ::pclose(p);
  return out;
}

bool is_fixture(const std::string& path) {
  return path.rfind("fuzz/corpus/", 0) == 0 || path.find("/data/") != std::string::npos;
}

TEST(Repository, TracksNoGeneratedFile) {
  const std::vector<std::string> files = tracked_files(CRUCIBLE_SOURCE_DIR);
  if (files.empty()) GTEST_SKIP() << CRUCIBLE_SOURCE_DIR << " is not a git checkout";
  // What train, probe, plan, curate, tokenize and export write.
  const std::regex generated(
      R"((^|/)(probe\.json|cluster\.toml|plan\.json|trace\.json|metrics\.jsonl|events\.jsonl|report\.html|)"
      R"(manifest\.json|job\.json|log\.txt)$|\.safetensors$|(^|/)(runs|tokens)/|(^|/)ckpt/step_|^data/|^build[^/]*/)");
  std::vector<std::string> bad;
  for (const std::string& f : files)
    if (std::regex_search(f, generated) && !is_fixture(f)) bad.push_back(f);
  std::string list;
  for (const std::string& f : bad) list += "\n  " + f;
  EXPECT_TRUE(bad.empty()) << "generated files are tracked (remove them; .gitignore lists them):" << list;
}

}  // namespace
