// Every committed fuzz input (the seeds and every crash a fuzzer ever found,
// fuzz/corpus/NAME/*) replayed through its target in the ordinary build:
// what once broke a reader stays fixed.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "fuzz/targets.h"
#include "support/files.h"

namespace crucible::fuzz {
namespace {

namespace fs = std::filesystem;

TEST(FuzzReplay, EveryCommittedInputEndsWell) {
  for (const NamedTarget& t : all_targets()) {
#if defined(__SANITIZE_ADDRESS__) && !defined(__clang__)
    // GCC's ASan reports simdjson's parser (allocated inside libsimdjson.so,
    // freed by its inline destructor) as an alloc-dealloc mismatch; the clang
    // fuzz build, which instruments the same code, runs this target cleanly.
    if (std::string(t.name) == "jsonl") continue;
#endif
    const fs::path dir = fs::path(CRUCIBLE_SOURCE_DIR) / "fuzz/corpus" / t.name;
    ASSERT_TRUE(fs::is_directory(dir)) << dir;
    size_t inputs = 0;
    for (const auto& e : fs::directory_iterator(dir)) {
      const std::string bytes = testutil::read_file(e.path().string());
      SCOPED_TRACE(e.path().string());
      EXPECT_EQ(t.fn(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), 0);
      ++inputs;
    }
    EXPECT_GE(inputs, 2u) << t.name << ": seeds missing";
  }
}

// Every value of every committed JSON seed (probe.json, plan.json,
// trace.json) replaced by one of another type or out of range, and every
// value of every cluster.toml seed likewise: each mutant ends well in its
// target (a Status, never a crash or an uncaught exception). The fuzzers
// find such inputs by chance; this walks all of them.
const std::vector<std::string> kJsonMutants = {"5",    "\"2\"", "[1,2]", "{}",    "null",
                                               "true", "-1",    "1e308", "-1e308"};

// A JSON pointer's reference token for `key` (RFC 6901: ~ as ~0, / as ~1).
std::string pointer_token(const std::string& key) {
  std::string t;
  for (char c : key) t += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
  return t;
}

void json_paths(const nlohmann::json& j, const std::string& at, std::vector<std::string>* out) {
  if (!at.empty()) out->push_back(at);
  if (j.is_object())
    for (const auto& [k, v] : j.items()) json_paths(v, at + "/" + pointer_token(k), out);
  if (j.is_array())
    for (size_t i = 0; i < j.size(); ++i) json_paths(j[i], at + "/" + std::to_string(i), out);
}

Target target_named(const std::string& name) {
  for (const NamedTarget& t : all_targets())
    if (name == t.name) return t.fn;
  return nullptr;
}

int run(Target fn, const std::string& bytes) {
  return fn(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

TEST(FuzzMutations, EveryJsonFieldOfAnotherTypeOrOutOfRangeEndsWell) {
  for (const char* name : {"probe", "plan_json", "trace"}) {
    const Target fn = target_named(name);
    ASSERT_NE(fn, nullptr) << name;
    size_t mutants = 0;
    for (const auto& e :
         fs::directory_iterator(fs::path(CRUCIBLE_SOURCE_DIR) / "fuzz/corpus" / name)) {
      const nlohmann::json seed =
          nlohmann::json::parse(testutil::read_file(e.path().string()), nullptr, false);
      if (seed.is_discarded() || !(seed.is_object() || seed.is_array())) continue;
      std::vector<std::string> paths;
      json_paths(seed, "", &paths);
      for (const std::string& path : paths)
        for (const std::string& m : kJsonMutants) {
          nlohmann::json doc = seed;
          doc[nlohmann::json::json_pointer(path)] = nlohmann::json::parse(m);
          const std::string text = doc.dump();
          SCOPED_TRACE(e.path().string() + " " + path + " = " + m);
          ASSERT_EQ(run(fn, text), 0);
          ++mutants;
        }
    }
    EXPECT_GT(mutants, 20u) << name;
  }
}

TEST(FuzzMutations, EveryClusterValueOfAnotherTypeOrOutOfRangeEndsWell) {
  const Target fn = target_named("cluster");
  ASSERT_NE(fn, nullptr);
  const std::vector<std::string> values = {"5",  "\"2\"", "[1, 2]", "{}",  "true",
                                           "-1", "0",     "1e308",  "inf", "nan"};
  const std::vector<std::string> entries = {"[1e308, 1, 1, 0.5],", "[1, 1, 1, inf],",
                                            "[0, 1, 1, 0.5],", "\"x\",", "5,"};
  size_t mutants = 0;
  for (const auto& e :
       fs::directory_iterator(fs::path(CRUCIBLE_SOURCE_DIR) / "fuzz/corpus/cluster")) {
    const std::string seed = testutil::read_file(e.path().string());
    std::vector<std::string> lines;
    for (size_t p = 0; p < seed.size();) {
      size_t nl = seed.find('\n', p);
      if (nl == std::string::npos) nl = seed.size();
      lines.push_back(seed.substr(p, nl - p));
      p = nl + 1;
    }
    for (size_t i = 0; i < lines.size(); ++i) {
      const std::string& l = lines[i];
      const size_t eq = l.find(" = ");
      std::vector<std::string> variants;
      if (eq != std::string::npos && l[0] != '#')
        for (const std::string& v : values) variants.push_back(l.substr(0, eq + 3) + v);
      else if (l.find_first_not_of(' ') != std::string::npos &&
               l[l.find_first_not_of(' ')] == '[' && l[0] == ' ')
        variants = entries;
      for (const std::string& v : variants) {
        std::string text;
        for (size_t k = 0; k < lines.size(); ++k) text += (k == i ? v : lines[k]) + "\n";
        SCOPED_TRACE(e.path().string() + ":" + std::to_string(i + 1) + ": " + v);
        ASSERT_EQ(run(fn, text), 0);
        ++mutants;
      }
    }
  }
  EXPECT_GT(mutants, 50u);
}

}  // namespace
}  // namespace crucible::fuzz
