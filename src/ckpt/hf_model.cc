#include "ckpt/hf_model.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include <xxhash.h>

#include "ckpt/checkpoint_internal.h"
#include "ckpt/model_io.h"
#include "ckpt/safetensors.h"
#include "core/dtype.h"
#include "core/json_io.h"

namespace crucible::ckpt {
namespace {

namespace fs = std::filesystem;

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  if (exp == 0x1f) {  // inf / NaN
    uint32_t u = sign | 0x7f800000u | (man << 13);
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  const float mag =
      exp == 0 ? std::ldexp(float(man), -24) : std::ldexp(float(man | 0x400), int(exp) - 25);
  return sign ? -mag : mag;
}

// The tensor's values as f32 (F32, BF16, F16); empty with *why set otherwise.
std::vector<float> as_f32(const LoadedTensor& t, std::string* why) {
  const size_t n = size_t(t.numel());
  std::vector<float> v(n);
  if (t.dtype == "F32") {
    std::memcpy(v.data(), t.bytes.data(), n * 4);
  } else if (t.dtype == "BF16" || t.dtype == "F16") {
    const uint16_t* h = reinterpret_cast<const uint16_t*>(t.bytes.data());
    for (size_t i = 0; i < n; ++i) {
      if (t.dtype == "F16") {
        v[i] = f16_to_f32(h[i]);
      } else {
        uint32_t u = uint32_t(h[i]) << 16;
        std::memcpy(&v[i], &u, 4);
      }
    }
  } else {
    *why = "dtype " + t.dtype + " (F32, BF16 and F16 are read)";
    v.clear();
  }
  return v;
}

bool is_mask_buffer(const std::string& name) {
  auto ends = [&](const std::string& s) {
    return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
  };
  return ends(".attn.bias") || ends(".attn.masked_bias");
}

// The safetensors files holding the weights, or why there are none.
Result<std::vector<std::string>> weight_files(const std::string& dir) {
  if (fs::is_regular_file(dir + "/model.safetensors"))
    return std::vector<std::string>{dir + "/model.safetensors"};
  const std::string index = dir + "/model.safetensors.index.json";
  if (fs::is_regular_file(index)) {
    auto j = read_json(index);
    if (!j) return Status::invalid("[import] " + index + ": " + j.status().message());
    const nlohmann::json& map = json_object_or_null(*j, "weight_map");
    if (!map.is_object() || map.empty())
      return Status::invalid("[import] " + index + ": no \"weight_map\" object");
    std::set<std::string> files;
    for (const auto& [name, file] : map.items()) {
      if (!file.is_string() || file.get<std::string>().find('/') != std::string::npos)
        return Status::invalid("[import] " + index + ": weight_map[\"" + name +
                               "\"] is not a file name");
      files.insert(dir + "/" + file.get<std::string>());
    }
    return std::vector<std::string>(files.begin(), files.end());
  }
  for (const char* pickle :
       {"pytorch_model.bin", "pytorch_model.bin.index.json", "model.ckpt", "tf_model.h5"})
    if (fs::exists(dir + "/" + pickle))
      return Status::invalid(
          "[import] " + dir + " holds " + pickle +
          " but no model.safetensors: pickle and TensorFlow checkpoints are not read "
          "(save the model with safe_serialization=True)");
  return Status::invalid("[import] " + dir +
                         ": no model.safetensors or model.safetensors.index.json");
}

}  // namespace

nlohmann::json hf_gpt2_config(const nn::GPTConfig& cfg, int eos_id) {
  return {{"architectures", {"GPT2LMHeadModel"}},
          {"model_type", "gpt2"},
          {"vocab_size", cfg.vocab_size},
          {"n_positions", cfg.seq_len},
          {"n_ctx", cfg.seq_len},
          {"n_embd", cfg.n_embd},
          {"n_layer", cfg.n_layer},
          {"n_head", cfg.n_head},
          {"n_inner", nullptr},
          // crucible's GELU is the tanh form (kernels/ref/gelu_ref.cc): HF's gelu_new.
          {"activation_function", "gelu_new"},
          {"layer_norm_epsilon", 1e-5},
          {"initializer_range", 0.02},
          {"resid_pdrop", 0.0},
          {"embd_pdrop", 0.0},
          {"attn_pdrop", 0.0},
          {"scale_attn_weights", true},
          {"scale_attn_by_inverse_layer_idx", false},
          {"reorder_and_upcast_attn", false},
          {"tie_word_embeddings", true},
          {"bos_token_id", eos_id},
          {"eos_token_id", eos_id},
          {"use_cache", true},
          {"torch_dtype", "float32"}};
}

nlohmann::json hf_generation_config(int eos_id, int tokenizer_vocab, int vocab_size) {
  nlohmann::json j = {{"bos_token_id", eos_id}, {"eos_token_id", eos_id}};
  if (tokenizer_vocab < vocab_size) {
    std::vector<int> padded;
    for (int id = tokenizer_vocab; id < vocab_size; ++id) padded.push_back(id);
    j["suppress_tokens"] = padded;
  }
  return j;
}

Result<nn::GPTConfig> read_hf_gpt2_config(const std::string& dir) {
  const std::string path = dir + "/config.json";
  auto j = read_json(path);
  if (!j) return Status::invalid("[import] " + j.status().message());
  if (!j->is_object()) return Status::invalid("[import] " + path + ": not a JSON object");
  auto bad = [&](const std::string& key, const std::string& why) {
    return Status::invalid("[import] " + path + ": " + key + " " + why);
  };
  const std::string type = json_string_or(*j, "model_type", "");
  if (type != "gpt2") return bad("model_type", "'" + type + "' is not supported (only gpt2)");
  if (j->contains("architectures")) {
    const auto& a = (*j)["architectures"];
    bool lm = a.is_array() && a.size() == 1 && a[0] == "GPT2LMHeadModel";
    if (!lm)
      return bad("architectures", a.dump() + " is not supported (only [\"GPT2LMHeadModel\"])");
  }
  // The keys that change what the model computes, with GPT2Config's defaults.
  auto str = [&](const char* k, const char* def) { return json_string_or(*j, k, def); };
  auto flag = [&](const char* k, bool def) {
    return j->contains(k) && (*j)[k].is_boolean() ? (*j)[k].get<bool>() : def;
  };
  const std::string act = str("activation_function", "gelu_new");
  if (act != "gelu_new" && act != "gelu_pytorch_tanh")
    return bad("activation_function",
               "'" + act + "' is not supported (crucible's GELU is the tanh form: gelu_new)");
  if (j->contains("layer_norm_epsilon")) {
    const auto& e = (*j)["layer_norm_epsilon"];
    if (!e.is_number() || std::fabs(e.get<double>() - 1e-5) > 1e-12)
      return bad("layer_norm_epsilon",
                 e.dump() + " is not supported (crucible's LayerNorm uses 1e-5)");
  }
  if (!flag("tie_word_embeddings", true))
    return bad("tie_word_embeddings", "false is not supported (the LM head is wte)");
  if (!flag("scale_attn_weights", true)) return bad("scale_attn_weights", "false is not supported");
  if (flag("scale_attn_by_inverse_layer_idx", false))
    return bad("scale_attn_by_inverse_layer_idx", "true is not supported");
  if (flag("add_cross_attention", false))
    return bad("add_cross_attention", "true is not supported");
  nn::GPTConfig cfg;
  for (auto [key, field] : {std::pair{"n_layer", &cfg.n_layer},
                            {"n_head", &cfg.n_head},
                            {"n_embd", &cfg.n_embd},
                            {"vocab_size", &cfg.vocab_size},
                            {"n_positions", &cfg.seq_len}}) {
    if (!j->contains(key) || !(*j)[key].is_number_integer() || (*j)[key].get<int64_t>() < 1 ||
        (*j)[key].get<int64_t>() > (int64_t(1) << 30))
      return bad(key, "is missing or not a positive integer");
    *field = (*j)[key].get<int>();
  }
  if (j->contains("n_inner") && !(*j)["n_inner"].is_null() && (*j)["n_inner"] != 4 * cfg.n_embd)
    return bad("n_inner", (*j)["n_inner"].dump() + " is not supported (the MLP is 4 x n_embd = " +
                              std::to_string(4 * cfg.n_embd) + " wide)");
  if (Status s = cfg.validate(); !s)
    return Status::invalid("[import] " + path + ": " + s.message());
  return cfg;
}

Status load_hf_weights(const std::string& dir, nn::ParamRegistry& params) {
  auto files = weight_files(dir);
  if (!files) return files.status();
  std::map<std::string, const nn::ParamSpec*> by_name;
  for (const auto& s : params.specs()) by_name[s.name] = &s;
  std::set<std::string> loaded;
  std::vector<float> lm_head;
  std::string lm_head_file;
  for (const std::string& path : *files) {
    auto file = read_safetensors(path);
    if (!file) return Status::invalid("[import] " + file.status().message());
    for (const auto& [raw, t] : file->tensors) {
      const std::string name =
          raw.rfind("transformer.", 0) == 0 || raw == "lm_head.weight" ? raw : "transformer." + raw;
      if (is_mask_buffer(name)) continue;  // causal-mask buffers of older transformers
      std::string why;
      std::vector<float> v = as_f32(t, &why);
      if (v.empty() && t.numel() > 0)
        return Status::invalid("[import] " + path + ": tensor " + raw + " has unsupported " + why);
      if (Status s = check_finite(path, raw, v.data(), v.size()); !s)
        return Status::invalid("[import] " + s.message());
      if (name == "lm_head.weight") {
        lm_head = std::move(v);
        lm_head_file = path;
        continue;
      }
      auto it = by_name.find(name);
      if (it == by_name.end())
        return Status::invalid("[import] " + path + ": tensor " + raw +
                               " is not part of a GPT-2 LM");
      const nn::ParamSpec& s = *it->second;
      std::vector<int64_t> want(s.whole_shape.d.begin(),
                                s.whole_shape.d.begin() + s.whole_shape.ndim);
      if (t.shape != want)
        return Status::invalid("[import] " + path + ": tensor " + raw + " is " +
                               shape_str(t.shape) + ", config.json makes it " + shape_str(want));
      if (!loaded.insert(name).second)
        return Status::invalid("[import] " + path + ": tensor " + raw + " is stored twice");
      nn::copy_from_whole(s, v.data(), params.host_values() + s.offset);
    }
  }
  for (const auto& s : params.specs())
    if (!loaded.count(s.name))
      return Status::invalid("[import] " + dir + ": tensor " + s.name + " is missing");
  if (!lm_head.empty()) {  // tied: it must be wte itself
    const nn::ParamSpec& wte = *by_name.at("transformer.wte.weight");
    if (lm_head.size() != wte.numel ||
        std::memcmp(lm_head.data(), params.host_values() + wte.offset, wte.numel * sizeof(float)) != 0)
      return Status::invalid(
          "[import] " + lm_head_file +
          ": lm_head.weight differs from transformer.wte.weight (an untied head is not supported)");
  }
  params.upload();  // to a GPU's memory; bf16 models: the working copy
  return Status::ok();
}

Result<uint64_t> hf_weights_fingerprint(const std::string& dir) {
  auto files = weight_files(dir);
  if (!files) return files.status();
  std::vector<uint64_t> digests;
  for (const std::string& f : *files) {
    auto h = detail::hash_file(f, f);
    if (!h) return h.status();
    digests.push_back(*h);
  }
  return uint64_t(XXH64(digests.data(), digests.size() * sizeof(uint64_t), 0));
}

}  // namespace crucible::ckpt
