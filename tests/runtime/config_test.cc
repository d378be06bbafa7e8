#include "runtime/config.h"

#include "support/kernel_harness.h"

#include <gtest/gtest.h>

#include <toml++/toml.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <fstream>
#include <random>
#include <sstream>
#include <set>


namespace crucible::runtime {
namespace {

// The error message of parsing `toml` with `overrides` ("" when it parsed).
std::string error_of(const std::string& toml, const std::vector<std::string>& overrides = {}) {
  auto r = parse_config(toml, "test.toml", overrides);
  return r ? "" : r.status().message();
}

TEST(Config, DefaultParsesAndMatchesTheTinyWorkload) {
  auto cfg = load_config("");
  ASSERT_TRUE(cfg) << cfg.status().message();
  EXPECT_EQ(cfg->model.n_layer, 4);
  EXPECT_EQ(cfg->model.n_embd, 256);
  EXPECT_EQ(cfg->model.vocab_size, 8192);
  EXPECT_EQ(cfg->train.batch_size, 8);
  EXPECT_EQ(cfg->data.format, "fortunes");
}

TEST(Config, ShippedConfigsParse) {
  for (const char* name : {"tiny", "gpt2-124M"}) {
    auto cfg = load_config(std::string(CRUCIBLE_SOURCE_DIR) + "/configs/" + name + ".toml");
    ASSERT_TRUE(cfg) << name << ": " << cfg.status().message();
  }
  auto gpt2 = load_config(std::string(CRUCIBLE_SOURCE_DIR) + "/configs/gpt2-124M.toml");
  EXPECT_EQ(gpt2->model.n_layer, 12);
  EXPECT_EQ(gpt2->model.vocab_size, 50304);
}

TEST(Config, ResolvedTomlRoundTrips) {
  auto cfg = load_config("", {"optim.lr=0.000123", "data.source=a,b", "train.seed=99",
                              "fault.inject=[\"ckpt_write_error@3\"]", "optim.eps=1e-9"});
  ASSERT_TRUE(cfg) << cfg.status().message();
  std::string text = to_toml(*cfg);
  auto back = parse_config(text, "resolved");
  ASSERT_TRUE(back) << back.status().message() << "\n" << text;
  EXPECT_EQ(to_json(*back), to_json(*cfg));
  EXPECT_EQ(back->optim.lr, 0.000123);
  EXPECT_EQ(back->optim.eps, 1e-9);
  EXPECT_EQ(back->data.source, (std::vector<std::string>{"a", "b"}));
}

// What a run does with a config: parse (file + --set), then resolve.
Result<Config> resolved(const std::string& text, const std::vector<std::string>& overrides = {}) {
  auto cfg = parse_config(text, "test", overrides);
  if (!cfg) return cfg.status();
  CRUCIBLE_RETURN_IF_ERROR(resolve_config(*cfg));
  return cfg;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The defect this pins: the resolved default wrote Gopher's web thresholds
// with profile "auto", so a resumed run curated fortunes with min_words = 50.
TEST(Config, ResolvedDefaultKeepsTheShortProfileWhenReadBack) {
  auto first = resolved(default_config_toml());
  ASSERT_TRUE(first) << first.status().message();
  EXPECT_EQ(first->curate.profile, "short");
  EXPECT_EQ(first->quality.min_words, 3);
  EXPECT_DOUBLE_EQ(first->near.threshold, 0.8);
  auto again = resolved(to_toml(*first));
  ASSERT_TRUE(again) << again.status().message();
  EXPECT_EQ(again->curate.profile, "short");
  EXPECT_EQ(again->quality.min_words, 3);
  EXPECT_EQ(to_toml(*again), to_toml(*first));
}

// Property: resolve(read(write(resolve(x)))) == resolve(x), over the embedded
// default, every shipped config and random --set overrides (profiles,
// formats, thresholds and ordinary keys). Seed: CRUCIBLE_TEST_SEED.
TEST(Config, ResolutionIsAFixedPoint) {
  const unsigned seed = unsigned(crucible::testing::test_seed());
  SCOPED_TRACE("CRUCIBLE_TEST_SEED=" + std::to_string(seed));
  std::mt19937 rng(seed);
  const std::vector<std::vector<std::string>> pool = {
      {"curate.profile=auto", "curate.profile=web", "curate.profile=short"},
      {"curate.enabled=true", "curate.enabled=false"},
      {"data.format=fortunes", "data.format=auto", "data.format=text"},
      {"curate.quality.min_words=7", "curate.quality.min_words=50", "curate.quality.max_words=900"},
      {"curate.near.threshold=0.65", "curate.near.hash_bits=32", "curate.near.bands=10"},
      {"curate.repetition.max_top_2gram=0.3", "curate.repetition.max_dup_line_frac=0.2"},
      {"curate.c4=true", "curate.c4_lines.min_sentences=1"},
      {"optim.lr=0.00031", "optim.eps=1e-9", "optim.beta2=0.999"},
      {"train.steps=17", "train.batch_size=3", "train.grad_accum=2", "train.seed=42"},
      {"data.dataset=some/dir", "data.cache_dir=elsewhere", "data.val_fraction=0.1"},
      {"fault.inject=[\"kill@3\"]", "dist.zero=1", "run.name=other"},
  };
  std::vector<std::pair<std::string, std::string>> bases = {{"<default>", default_config_toml()}};
  for (const char* name : {"tiny", "gpt2-124M"}) {
    const std::string path = std::string(CRUCIBLE_SOURCE_DIR) + "/configs/" + name + ".toml";
    bases.push_back({path, read_text(path)});
  }
  int checked = 0;
  for (const auto& [origin, text] : bases) {
    for (int trial = 0; trial < 60; ++trial) {
      std::vector<std::string> overrides;
      for (const auto& choices : pool)
        if (rng() % 3 == 0) overrides.push_back(choices[rng() % choices.size()]);
      std::string why = origin;
      for (const auto& o : overrides) why += " --set " + o;
      SCOPED_TRACE(why);
      auto first = resolved(text, overrides);
      ASSERT_TRUE(first) << first.status().message();
      const std::string written = to_toml(*first);
      auto back = resolved(written);
      ASSERT_TRUE(back) << back.status().message() << "\n" << written;
      EXPECT_EQ(to_toml(*back), written);
      EXPECT_EQ(to_json(*back), to_json(*first));
      ++checked;
    }
  }
  EXPECT_EQ(checked, 3 * 60);
}

// The resolved file nests every key where the schema puts it: the only
// top-level tables are the sections, the curation thresholds under [curate].
TEST(Config, ResolvedTomlNestsKeysWhereTheSchemaPutsThem) {
  auto cfg = resolved(default_config_toml());
  ASSERT_TRUE(cfg);
  toml::table root = toml::parse(to_toml(*cfg));
  std::set<std::string> top;
  for (const auto& [k, v] : root) {
    top.insert(std::string(k.str()));
    EXPECT_TRUE(v.is_table()) << k.str();
  }
  EXPECT_EQ(top, (std::set<std::string>{"ckpt", "curate", "data", "dist", "fault", "init", "model", "optim",
                                        "run", "train"}));
  for (const char* sub : {"quality", "repetition", "c4_lines", "near"})
    EXPECT_TRUE(root["curate"][sub].is_table()) << sub;
  EXPECT_EQ(root["curate"]["quality"]["min_words"].value<int64_t>(), 3);
  // The old top-level spelling is an unknown section now, with the new home named.
  EXPECT_NE(error_of("[quality]\nmin_words = 3\n").find("quality: unknown section"), std::string::npos);
  EXPECT_NE(error_of("", {"quality.min_words=3"}).find("did you mean curate.quality.min_words?"),
            std::string::npos);
  // A switch is a value, a table of thresholds is a table: never confused.
  EXPECT_NE(error_of("[curate]\nquality = 3\n").find("curate.quality: must be a [curate.quality] table"),
            std::string::npos);
  EXPECT_NE(error_of("[curate.c4]\nx = 1\n").find("curate.c4: must be a value"), std::string::npos);
}

// Found by fuzz_config: a bare --set word that is not text TOML can hold
// would be written to config.toml as something that reads back otherwise.
TEST(Config, BareSetWordsMustBeText) {
  for (const std::string& v : {std::string("run.name=a\xff"), std::string("fault.inject=kill\x01@3"),
                              std::string("data.source=a,\xc3")}) {
    EXPECT_NE(error_of("", {v}).find("is not valid UTF-8 text (in --set)"), std::string::npos) << v;
  }
  EXPECT_EQ(error_of("", {"run.name=caf\xc3\xa9"}), "");  // UTF-8 is text
}

TEST(Config, OverridesAreTyped) {
  auto cfg = load_config("", {"train.steps=12", "optim.lr=3e-4", "data.format=text",
                              "data.source=[\"x.txt\"]", "run.name=\"quoted\"", "optim.lr=1"});
  ASSERT_TRUE(cfg) << cfg.status().message();
  EXPECT_EQ(cfg->train.steps, 12);
  EXPECT_EQ(cfg->optim.lr, 1.0);  // the later override wins; an integer is a valid number
  EXPECT_EQ(cfg->data.format, "text");
  EXPECT_EQ(cfg->data.source, std::vector<std::string>{"x.txt"});
  EXPECT_EQ(cfg->run.name, "quoted");
}

TEST(Config, UnknownKeysAreNamed) {
  EXPECT_NE(error_of("[model]\nn_layers = 3\n").find("model.n_layers: unknown key (in test.toml)"),
            std::string::npos);
  EXPECT_NE(error_of("[model]\nsteps = 3\n")
                .find("model.steps: unknown key, did you mean train.steps? (in test.toml)"),
            std::string::npos);
  EXPECT_NE(error_of("[modle]\nn_layer = 3\n").find("modle: unknown section"), std::string::npos);
  EXPECT_NE(error_of("", {"train.step=3"}).find("[config] train.step: unknown key (in --set)"),
            std::string::npos);
  EXPECT_NE(error_of("steps = 3\n").find("steps: must be a [section], did you mean train.steps?"),
            std::string::npos);
}

TEST(Config, WrongTypesAreNamed) {
  EXPECT_NE(error_of("[model]\nn_layer = \"four\"\n")
                .find("model.n_layer: expected an integer, got string"),
            std::string::npos);
  EXPECT_NE(error_of("[optim]\nlr = \"fast\"\n").find("optim.lr: expected a number"),
            std::string::npos);
  EXPECT_NE(error_of("[data]\nsource = [1, 2]\n").find("data.source: expected an array of strings"),
            std::string::npos);
  EXPECT_NE(error_of("", {"train.steps=abc"}).find("train.steps: 'abc' is not an integer"),
            std::string::npos);
  EXPECT_NE(error_of("", {"train.steps=1.5"}).find("train.steps: expected an integer"),
            std::string::npos);
  EXPECT_NE(error_of("[train]\nbatch_size = 10000000000\n")
                .find("train.batch_size: 10000000000 is out of range"),
            std::string::npos);
}

TEST(Config, ImpossibleValuesAreNamed) {
  EXPECT_NE(
      error_of("", {"model.n_embd=250"}).find("model.n_embd: 250 is not divisible by n_head = 4"),
      std::string::npos);
  EXPECT_NE(error_of("", {"train.batch_size=0"}).find("train.batch_size: must be >= 1"),
            std::string::npos);
  EXPECT_NE(error_of("", {"optim.lr=-1"}).find("optim.lr: must be > 0"), std::string::npos);
  EXPECT_NE(error_of("", {"data.val_fraction=0.9"}).find("data.val_fraction"), std::string::npos);
  EXPECT_NE(error_of("", {"data.format=csv"}).find("data.format: 'csv' is not one of"),
            std::string::npos);
  EXPECT_NE(error_of("", {"data.vocab_size=9000"}).find("data.vocab_size"), std::string::npos);
  EXPECT_NE(error_of("", {"ckpt.keep=0"}).find("ckpt.keep: must be >= 1"), std::string::npos);
  EXPECT_NE(error_of("", {"train.steps"}).find("expected key=value"), std::string::npos);
  // Precision, recomputation, moments and gradient types (issue 17).
  EXPECT_NE(error_of("", {"train.precision=fp16"}).find("train.precision: 'fp16' is not one of fp32, bf16"),
            std::string::npos);
  EXPECT_NE(error_of("", {"train.recompute=some"}).find("train.recompute: 'some' is not one of none, selective, full"),
            std::string::npos);
  EXPECT_NE(error_of("", {"optim.moments=f16"}).find("optim.moments: 'f16' is not one of f32, bf16"),
            std::string::npos);
  EXPECT_NE(error_of("", {"dist.grad_dtype=fp8"}).find("dist.grad_dtype: 'fp8' is not one of f32, bf16"),
            std::string::npos);
  EXPECT_NE(error_of("", {"dist.grad_dtype=bf16", "dist.reproducible=true"})
                .find("dist.grad_dtype: bf16 needs dist.reproducible = false"),
            std::string::npos);
  EXPECT_EQ(error_of("", {"train.precision=bf16", "train.recompute=full", "optim.moments=bf16", "dist.grad_dtype=bf16",
                          "dist.tp=2", "dist.sequence_parallel=true"}),
            "");
}

TEST(Config, SyntaxErrorsNameTheLine) {
  std::string e = error_of("[model]\nn_layer = 4\nn_head = = 2\n");
  EXPECT_NE(e.find("[config] test.toml:3:"), std::string::npos) << e;
}

TEST(Config, ErrorsAreOneLine) {
  for (const std::string& e : {error_of("[model]\nn_layers = 3\n"), error_of("[x]\ny=1\n"),
                               error_of("", {"model.n_head=3"}), error_of("a = [\n")}) {
    ASSERT_FALSE(e.empty());
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
}

// The resolved config.toml writes 0.1 as 0.1 and still resolves to itself.
TEST(FormatDouble, ConfigTomlWritesTheShortestText) {
  auto cfg = load_config("");
  ASSERT_TRUE(cfg) << cfg.status().message();
  const std::string text = to_toml(*cfg);
  EXPECT_NE(text.find("weight_decay = 0.1\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("0000000"), std::string::npos) << text;
  cfg->optim.lr = 0.1 + 0.2;  // 0.30000000000000004: shortest is all 17 digits
  const std::string odd = to_toml(*cfg);
  EXPECT_NE(odd.find("lr = 0.30000000000000004\n"), std::string::npos) << odd;
}

}  // namespace
}  // namespace crucible::runtime
