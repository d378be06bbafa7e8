#include "serve/api.h"

#include <nlohmann/json.hpp>

#include <limits>
#include <utility>

namespace crucible::serve {
namespace {

using json = nlohmann::json;

// Text the model produced may end in a partial character or hold invalid
// bytes (a byte-level vocabulary): replace rather than fail to answer.
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

ParsedRequest refuse(const std::string& param, const std::string& message, int status = 400,
                     const char* type = "invalid_request_error") {
  ParsedRequest p;
  p.error = ApiError{status, message, param, type};
  return p;
}

bool is_null_or(const json& v, bool (json::*is)() const) { return v.is_null() || (v.*is)(); }

}  // namespace

std::string error_body(const ApiError& e) {
  json err = {{"message", e.message}, {"type", e.type}, {"code", nullptr}};
  err["param"] = e.param.empty() ? json(nullptr) : json(e.param);
  return dump(json{{"error", err}});
}

ParsedRequest parse_completion(const std::string& body, const ApiContext& ctx) {
  json j;
  try {
    j = json::parse(body);
  } catch (const json::parse_error& e) {
    return refuse("", std::string("the body is not valid JSON: ") + e.what());
  }
  if (!j.is_object()) return refuse("", "the body must be a JSON object");
  ParsedRequest p;
  CompletionRequest& r = p.request;
  bool have_prompt = false;
  std::string prompt_text;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    const json& v = it.value();
    if (k == "model") {
      if (!v.is_string()) return refuse(k, "model must be a string");
      if (v.get<std::string>() != ctx.model)
        return refuse(k, "the model '" + v.get<std::string>() + "' is not served here (this server has '" +
                             ctx.model + "')", 404, "not_found_error");
    } else if (k == "prompt") {
      have_prompt = true;
      if (v.is_array() && v.size() == 1 && v[0].is_string()) {
        prompt_text = v[0].get<std::string>();
      } else if (v.is_string()) {
        prompt_text = v.get<std::string>();
      } else if (v.is_array() && !v.empty() && v[0].is_number_integer()) {
        for (const auto& t : v) {
          if (!t.is_number_integer() || t.get<int64_t>() < 0 ||
              t.get<int64_t>() >= ctx.tokenizer->vocab_size())
            return refuse(k, "prompt token ids must be integers in [0, " +
                                 std::to_string(ctx.tokenizer->vocab_size()) + ")");
          r.prompt.push_back(int32_t(t.get<int64_t>()));
        }
      } else if (v.is_array() && v.size() > 1 && v[0].is_string()) {
        return refuse(k, "a list of several prompts is not supported: send one request per prompt");
      } else {
        return refuse(k, "prompt must be a string, a list of one string or a list of token ids");
      }
    } else if (k == "max_tokens") {
      if (v.is_null()) continue;
      if (!v.is_number_integer() || v.get<int64_t>() < 1)
        return refuse(k, "max_tokens must be an integer >= 1");
      r.max_tokens = int(std::min<int64_t>(v.get<int64_t>(), std::numeric_limits<int>::max()));
    } else if (k == "temperature") {
      if (v.is_null()) continue;
      if (!v.is_number() || v.get<double>() < 0 || v.get<double>() > 2)
        return refuse(k, "temperature must be a number in [0, 2]");
      r.sampling.temperature = v.get<float>();
    } else if (k == "top_p") {
      if (v.is_null()) continue;
      if (!v.is_number() || !(v.get<double>() > 0) || v.get<double>() > 1)
        return refuse(k, "top_p must be a number in (0, 1]");
      r.sampling.top_p = v.get<float>();
    } else if (k == "top_k") {
      if (v.is_null()) continue;
      if (!v.is_number_integer() || v.get<int64_t>() < -1 || v.get<int64_t>() > (1 << 30))
        return refuse(k, "top_k must be an integer >= -1 (-1 or 0: every token)");
      r.sampling.top_k = std::max(0, int(v.get<int64_t>()));
    } else if (k == "seed") {
      if (v.is_null()) continue;
      if (!v.is_number_integer()) return refuse(k, "seed must be an integer");
      r.seed = v.is_number_unsigned() ? v.get<uint64_t>() : uint64_t(v.get<int64_t>());
    } else if (k == "stop") {
      if (v.is_null()) continue;
      if (v.is_string()) {
        r.stop = {v.get<std::string>()};
      } else if (v.is_array() && v.size() <= 4) {
        for (const auto& s : v) {
          if (!s.is_string()) return refuse(k, "stop must be a string or a list of up to 4 strings");
          r.stop.push_back(s.get<std::string>());
        }
      } else {
        return refuse(k, "stop must be a string or a list of up to 4 strings");
      }
    } else if (k == "stream") {
      if (!is_null_or(v, &json::is_boolean)) return refuse(k, "stream must be true or false");
      r.stream = v.is_boolean() && v.get<bool>();
    } else if (k == "stream_options") {
      if (v.is_null()) continue;
      if (!v.is_object()) return refuse(k, "stream_options must be an object");
      for (auto o = v.begin(); o != v.end(); ++o) {
        if (o.key() != "include_usage")
          return refuse(k + "." + o.key(), "unknown field '" + k + "." + o.key() + "'");
        if (!o.value().is_boolean()) return refuse(k + ".include_usage", "include_usage must be true or false");
        r.include_usage = o.value().get<bool>();
      }
    } else if (k == "return_token_ids") {
      if (!is_null_or(v, &json::is_boolean)) return refuse(k, "return_token_ids must be true or false");
      r.return_token_ids = v.is_boolean() && v.get<bool>();
    } else if (k == "ignore_eos") {
      if (!is_null_or(v, &json::is_boolean)) return refuse(k, "ignore_eos must be true or false");
      r.ignore_eos = v.is_boolean() && v.get<bool>();
    } else if (k == "n" || k == "best_of") {
      if (!v.is_null() && !(v.is_number_integer() && v.get<int64_t>() == 1))
        return refuse(k, k + " must be 1: this server returns one completion per request");
    } else if (k == "echo") {
      if (!v.is_null() && !(v.is_boolean() && !v.get<bool>())) return refuse(k, "echo is not supported");
    } else if (k == "logprobs") {
      if (!v.is_null()) return refuse(k, "logprobs are not supported");
    } else if (k == "suffix") {
      if (!v.is_null() && !(v.is_string() && v.get<std::string>().empty()))
        return refuse(k, "suffix is not supported");
    } else if (k == "presence_penalty" || k == "frequency_penalty") {
      if (!v.is_null() && !(v.is_number() && v.get<double>() == 0))
        return refuse(k, k + " is not supported (only 0)");
    } else if (k == "logit_bias") {
      if (!v.is_null() && !(v.is_object() && v.empty())) return refuse(k, "logit_bias is not supported");
    } else if (k == "user") {
      if (!is_null_or(v, &json::is_string)) return refuse(k, "user must be a string");
    } else {
      return refuse(k, "unknown field '" + k + "'");
    }
  }
  if (!have_prompt) return refuse("prompt", "prompt is required");
  if (r.prompt.empty()) r.prompt = ctx.tokenizer->encode(prompt_text);
  if (r.prompt.empty()) r.prompt = {ctx.tokenizer->eos_id()};  // a new document, as `generate` starts
  r.sampling.vocab = ctx.tokenizer->vocab_size();
  const int64_t n = int64_t(r.prompt.size());
  if (n >= ctx.context)
    return refuse("prompt", "the prompt is " + std::to_string(n) + " tokens; the model's context is " +
                                std::to_string(ctx.context) + " tokens");
  if (n + r.max_tokens > ctx.context)
    return refuse("max_tokens", "the prompt (" + std::to_string(n) + " tokens) plus max_tokens (" +
                                    std::to_string(r.max_tokens) + ") exceeds the model's context of " +
                                    std::to_string(ctx.context) + " tokens");
  return p;
}

std::string completion_body(const std::string& id, int64_t created, const std::string& model,
                            const std::string& text, const char* finish_reason, const Usage& usage,
                            const std::vector<int32_t>* token_ids) {
  json choice = {{"index", 0}, {"text", text}, {"logprobs", nullptr}, {"finish_reason", finish_reason}};
  if (token_ids) choice["token_ids"] = *token_ids;
  return dump(json{{"id", id},
                   {"object", "text_completion"},
                   {"created", created},
                   {"model", model},
                   {"choices", json::array({choice})},
                   {"usage",
                    {{"prompt_tokens", usage.prompt},
                     {"completion_tokens", usage.completion},
                     {"total_tokens", usage.prompt + usage.completion}}}});
}

std::string chunk_event(const std::string& id, int64_t created, const std::string& model,
                        const std::string& text, const char* finish_reason,
                        const std::vector<int32_t>* token_ids) {
  json choice = {{"index", 0}, {"text", text}, {"logprobs", nullptr}};
  choice["finish_reason"] = finish_reason ? json(finish_reason) : json(nullptr);
  if (token_ids) choice["token_ids"] = *token_ids;
  json j = {{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", model},
            {"choices", json::array({choice})}};
  return "data: " + dump(j) + "\n\n";
}

std::string usage_event(const std::string& id, int64_t created, const std::string& model,
                        const Usage& usage) {
  json j = {{"id", id},
            {"object", "text_completion"},
            {"created", created},
            {"model", model},
            {"choices", json::array()},
            {"usage",
             {{"prompt_tokens", usage.prompt},
              {"completion_tokens", usage.completion},
              {"total_tokens", usage.prompt + usage.completion}}}};
  return "data: " + dump(j) + "\n\n";
}

std::string models_body(const std::string& model, int64_t created, int context) {
  return dump(json{{"object", "list"},
                   {"data", json::array({{{"id", model},
                                          {"object", "model"},
                                          {"created", created},
                                          {"owned_by", "crucible"},
                                          {"max_model_len", context}}})}});
}

}  // namespace crucible::serve
