#include "runtime/resume_check.h"

#include <gtest/gtest.h>

namespace crucible::runtime {
namespace {

DataPin pin() { return {"data/curated-70011506", 0x1111, 0x2222, 0x3333}; }

TEST(DataPin, RoundTripsThroughTheManifestJson) {
  auto back = DataPin::from_json(pin().to_json(), "m");
  ASSERT_TRUE(back) << back.status().message();
  EXPECT_EQ(back->dataset, pin().dataset);
  EXPECT_EQ(back->train_xxh64, 0x1111u);
  EXPECT_EQ(back->val_xxh64, 0x2222u);
  EXPECT_EQ(back->tokenizer, 0x3333u);
}

TEST(DataPin, MalformedPinIsCorruptNotACrash) {
  for (const char* text : {R"("x")", R"({"dataset": 3})", R"({"dataset": "d", "train_xxh64": 5})",
                           R"({"dataset": "d", "train_xxh64": "zz", "val_xxh64": "0", "tokenizer_fingerprint": "0"})",
                           R"([1, 2])"}) {
    auto r = DataPin::from_json(nlohmann::json::parse(text), "step_0000004/manifest.json");
    ASSERT_FALSE(r) << text;
    EXPECT_EQ(r.status().code(), Code::kCorrupt);
    EXPECT_NE(r.status().message().find("step_0000004/manifest.json"), std::string::npos);
  }
}

TEST(DataPin, EachDifferenceIsRefusedNamingBothDatasets) {
  EXPECT_TRUE(check_data_pin(pin(), pin(), "step_0000020").is_ok());
  DataPin moved = pin();
  moved.dataset = "elsewhere/copy";  // the same bytes under another path are the same data
  EXPECT_TRUE(check_data_pin(pin(), moved, "step_0000020").is_ok());
  for (int field = 0; field < 3; ++field) {
    DataPin other = pin();
    other.dataset = "data/curated-5dd04cc1";
    (field == 0 ? other.train_xxh64 : field == 1 ? other.val_xxh64 : other.tokenizer) ^= 1;
    Status s = check_data_pin(pin(), other, "step_0000020");
    ASSERT_FALSE(s.is_ok()) << field;
    EXPECT_EQ(s.code(), Code::kInvalidArgument);
    for (const char* needle : {"step_0000020", "data/curated-70011506", "data/curated-5dd04cc1"})
      EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
    EXPECT_EQ(s.message().find('\n'), std::string::npos);
  }
}

TEST(DataPin, TokenizerPinNamesTheFile) {
  EXPECT_TRUE(check_tokenizer_pin(pin(), 0x3333, "RUN/tokenizer.model", "step_1").is_ok());
  Status s = check_tokenizer_pin(pin(), 0x4444, "RUN/tokenizer.model", "step_1");
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("RUN/tokenizer.model"), std::string::npos);
  EXPECT_NE(s.message().find("0000000000004444"), std::string::npos);
}

TEST(ResumeConfig, AChangedModelShapeNamesTheKey) {
  auto cfg = load_config("");
  ASSERT_TRUE(cfg);
  const nlohmann::json recorded = to_json(*cfg);
  EXPECT_TRUE(check_resume_config(recorded, *cfg, "step_0000010").is_ok());
  Config deeper = *cfg;
  deeper.model.n_layer = 8;
  Status s = check_resume_config(recorded, deeper, "step_0000010");
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("model.n_layer: this run asks for 8, step_0000010 was trained with 4"),
            std::string::npos)
      << s.message();
  Config other_lr = *cfg;  // not the model's shape: a resume may change it
  other_lr.optim.lr = 1e-4;
  EXPECT_TRUE(check_resume_config(recorded, other_lr, "step_0000010").is_ok());
  EXPECT_TRUE(check_resume_config(nlohmann::json(), deeper, "old").is_ok());  // nothing recorded
}

// A fine-tuning run resumes from its own checkpoints: another init.from is
// refused; a checkpoint from before [init] existed counts as no source.
TEST(ResumeConfig, AChangedInitSourceNamesTheKey) {
  auto cfg = load_config("", {"init.from=/src/a"});
  ASSERT_TRUE(cfg);
  const nlohmann::json recorded = to_json(*cfg);
  EXPECT_TRUE(check_resume_config(recorded, *cfg, "step_0000010").is_ok());
  Config other = *cfg;
  other.init.from = "/src/b";
  Status s = check_resume_config(recorded, other, "step_0000010");
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("[config] init.from: this run asks for \"/src/b\", step_0000010 was trained with "
                             "\"/src/a\""),
            std::string::npos)
      << s.message();
  nlohmann::json before_init = recorded;
  before_init.erase("init");
  EXPECT_FALSE(check_resume_config(before_init, *cfg, "old").is_ok());
  other.init.from.clear();
  EXPECT_TRUE(check_resume_config(before_init, other, "old").is_ok());
}

// A resume keeps the global batch (batch_size x grad_accum x data-parallel
// ranks): the layout may change around it, the batch may not.
TEST(ResumeBatch, AnotherGlobalBatchIsRefusedNamingTheChange) {
  const nlohmann::json world = {{"world_size", 2}, {"batch_size", 4}, {"grad_accum", 2},
                                {"dp", 2},         {"tp", 1},         {"pp", 1}};
  EXPECT_TRUE(check_resume_batch(world, 4, 2, 2, "step_0000010").is_ok());
  // Elastic fallback and resharding: fewer ranks, more accumulation, or a
  // smaller micro-batch on more ranks; the same 16 sequences.
  EXPECT_TRUE(check_resume_batch(world, 4, 4, 1, "step_0000010").is_ok());
  EXPECT_TRUE(check_resume_batch(world, 2, 2, 4, "step_0000010").is_ok());
  Status bigger = check_resume_batch(world, 8, 2, 2, "step_0000010");
  ASSERT_FALSE(bigger.is_ok());
  EXPECT_EQ(bigger.code(), Code::kInvalidArgument);
  EXPECT_NE(bigger.message().find(
                "[config] train.batch_size 4 -> 8: the global batch would change from 16 to 32 "
                "sequences (step_0000010 was trained at batch_size 4 x grad_accum 2 x 2 "
                "data-parallel ranks)"),
            std::string::npos)
      << bigger.message();
  Status accum = check_resume_batch(world, 4, 1, 2, "step_0000010");
  ASSERT_FALSE(accum.is_ok());
  EXPECT_NE(
      accum.message().find("train.grad_accum 2 -> 1: the global batch would change from 16 to 8"),
      std::string::npos)
      << accum.message();
  Status ranks = check_resume_batch(world, 4, 2, 4, "step_0000010");
  ASSERT_FALSE(ranks.is_ok());
  EXPECT_NE(ranks.message().find("data-parallel ranks 2 -> 4"), std::string::npos)
      << ranks.message();
  EXPECT_EQ(ranks.message().find('\n'), std::string::npos);
  // A checkpoint without dp: from world_size / (tp x pp).
  EXPECT_FALSE(
      check_resume_batch({{"world_size", 4}, {"batch_size", 1}, {"grad_accum", 1}, {"pp", 2}}, 1, 1,
                         1, "old")
          .is_ok());
  EXPECT_TRUE(
      check_resume_batch(nlohmann::json::object(), 64, 1, 1, "old").is_ok());  // nothing recorded
}

}  // namespace
}  // namespace crucible::runtime
