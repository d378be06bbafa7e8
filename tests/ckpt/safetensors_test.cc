// read_safetensors validates the whole format: a header that is a JSON object
// starting with '{', unique names, integral non-negative shapes matching the
// dtype's byte count, data offsets that tile the data section exactly (no
// overlap, no gap, nothing after the last tensor). Each malformation, with
// the checksums a checkpoint would carry all valid, is one corrupt Status.
#include "ckpt/safetensors.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>

#include "ckpt/model_io.h"
#include "nn/gpt.h"
#include "support/files.h"

namespace crucible::ckpt {
namespace {

// A file from a header text and a data section, as a writer would lay it out.
std::string file_of(std::string header, const std::string& data) {
  header.append((8 - header.size() % 8) % 8, ' ');
  uint64_t n = header.size();
  std::string out(reinterpret_cast<const char*>(&n), 8);
  return out + header + data;
}

std::string floats(size_t n, float v = 1.0f) {
  std::string s(n * 4, '\0');
  for (size_t i = 0; i < n; ++i) std::memcpy(&s[i * 4], &v, 4);
  return s;
}

Status read_text(const testutil::TempDir& dir, const std::string& bytes) {
  testutil::write_file(dir / "t.safetensors", bytes);
  return read_safetensors(dir / "t.safetensors").status();
}

TEST(Safetensors, WellFormedFilesRead) {
  testutil::TempDir dir("st_ok");
  const std::string two =
      R"({"__metadata__":{"format":"pt"},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},)"
      R"("a":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8]}})";
  EXPECT_TRUE(read_text(dir, file_of(two, floats(4))).is_ok());
  EXPECT_TRUE(read_text(dir, file_of(R"({"e":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}})", "")).is_ok());
}

TEST(Safetensors, EachMalformationIsCorruptNamingIt) {
  testutil::TempDir dir("st_bad");
  const std::string a = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  const std::string b = R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]})";
  struct Case {
    std::string bytes, needle;
  };
  std::string good = file_of("{" + a + "," + b + "}", floats(4));
  std::string short_header = good;  // header length one short: everything shifts by a byte
  uint64_t n;
  std::memcpy(&n, short_header.data(), 8);
  --n;
  std::memcpy(&short_header[0], &n, 8);
  for (const Case& c : std::vector<Case>{
           {short_header, "bytes after the last tensor"},
           {file_of("{" + a + "," + R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]})" + "}", floats(3)),
            "overlaps"},
           {file_of(R"({"a":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", floats(2)),
            "shape entry 2.5, not a non-negative integer"},
           {file_of(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", floats(2)), "shape entry -2"},
           {file_of("{" + a + "," + a + "}", floats(2)), "tensor a is listed twice"},
           {file_of("{" + a + "," + b + "}", floats(5)), "4 bytes after the last tensor"},
           {file_of("{" + b + "}", floats(4)), "8 unlisted bytes before tensor b"},
           {file_of(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", floats(2)),
            "inconsistent with its shape"},
           {file_of(R"({"a":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}})", floats(2)), "unknown dtype Q4"},
           {file_of(R"({"a":{"dtype":"F32","shape":[2]}})", floats(2)), "lacks dtype, shape or data_offsets"},
           {file_of(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,"8"]}})", floats(2)), "data_offsets"},
           {file_of(R"({"__metadata__":{"k":3}})", ""), "__metadata__.k is not a string"},
           {file_of(R"([1,2])", ""), "does not start with '{'"},
           {file_of(R"({"a":)", ""), "not a JSON object"},
           {std::string("\x05\0\0\0", 4), "too short"},
           {file_of(R"({"a":{"dtype":"F32","shape":[4611686018427387904,8],"data_offsets":[0,8]}})", floats(2)),
            "too large"},
       }) {
    Status s = read_text(dir, c.bytes);
    ASSERT_FALSE(s.is_ok()) << c.needle;
    EXPECT_EQ(s.code(), Code::kCorrupt) << s.message();
    EXPECT_NE(s.message().find(c.needle), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("t.safetensors"), std::string::npos) << s.message();
    EXPECT_EQ(s.message().find('\n'), std::string::npos) << s.message();
  }
}

TEST(Safetensors, NonFiniteWeightsAreNamedOnLoad) {
  testutil::TempDir dir("st_nan");
  nn::GPTConfig cfg;
  cfg.n_layer = 1, cfg.n_embd = 16, cfg.n_head = 2, cfg.vocab_size = 64, cfg.seq_len = 8;
  nn::GPT model(cfg);
  model.init_weights(3);
  ASSERT_TRUE(save_params(model.params(), dir / "w.safetensors").is_ok());
  nn::GPT back(cfg);
  ASSERT_TRUE(load_params(back.params(), dir / "w.safetensors").is_ok());
  for (float bad : {std::nanf(""), INFINITY}) {
    model.params().values()[model.params().specs()[2].offset + 5] = bad;  // a tensor of block 0
    ASSERT_TRUE(save_params(model.params(), dir / "w.safetensors").is_ok());
    Status s = load_params(back.params(), dir / "w.safetensors");
    ASSERT_FALSE(s.is_ok());
    EXPECT_EQ(s.code(), Code::kCorrupt);
    EXPECT_NE(s.message().find(model.params().specs()[2].name + " holds"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("at element 5"), std::string::npos) << s.message();
  }
}

// Linear, not quadratic: 20,000 tensors written and read back in seconds
// (the header was built through nlohmann::ordered_json's key lookup, a scan
// of every key before it: 4,000 tensors took 19 s, 20,000 did not finish).
// The bound is a guard, the round trip is the test.
TEST(Safetensors, TwentyThousandTensorsRoundTripInSeconds) {
  testutil::TempDir dir("st_many");
  const size_t n = 20000;
  std::vector<float> data(n * 3);
  for (size_t i = 0; i < data.size(); ++i) data[i] = float(i) * 0.5f;
  std::vector<TensorView> views;
  for (size_t i = 0; i < n; ++i)
    views.push_back({"layer." + std::to_string(i) + ".w", "F32", {3}, data.data() + 3 * i});
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(write_safetensors(dir / "many.safetensors", views, {{"format", "pt"}}));
  auto file = read_safetensors(dir / "many.safetensors");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(file) << file.status().message();
  ASSERT_EQ(file->tensors.size(), n);
  EXPECT_EQ(file->metadata.at("format"), "pt");
  for (size_t i = 0; i < n; i += 997) {
    const LoadedTensor* t = file->find("layer." + std::to_string(i) + ".w");
    ASSERT_NE(t, nullptr) << i;
    ASSERT_EQ(t->shape, std::vector<int64_t>{3});
    EXPECT_EQ(std::memcmp(t->f32(), data.data() + 3 * i, 12), 0) << i;
  }
  EXPECT_LT(seconds, 20) << "20,000 tensors took " << seconds << " s";
  // The same name twice is refused rather than written as a file no reader takes.
  views.push_back(views.front());
  EXPECT_FALSE(write_safetensors(dir / "twice.safetensors", views));
}

}  // namespace
}  // namespace crucible::ckpt
