#include "runtime/config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>


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

}  // namespace
}  // namespace crucible::runtime
