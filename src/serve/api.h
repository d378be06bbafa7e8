// The OpenAI-compatible wire format of `crucible serve` (docs/serve.md):
// POST /v1/completions bodies in, completion and server-sent-event chunk
// bodies out, and the error body. Pure functions of their inputs.
//
// A body is refused (400, naming the field) when it is not a JSON object,
// when a field has the wrong type or an impossible value, when it asks for
// what this server does not do (n > 1, best_of > 1, echo, logprobs, suffix,
// penalties, logit_bias: OpenAI's API has them, a crucible model serves one
// greedy or sampled continuation), when a field is unknown (as OpenAI does:
// a misspelt max_tokens must not silently become 16), and when the prompt
// plus max_tokens exceeds the model's context.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/text_tokenizer.h"
#include "nn/sampler.h"

namespace crucible::serve {

struct ApiError {
  int status = 400;
  std::string message;
  std::string param;                           // the field, or empty
  std::string type = "invalid_request_error";  // OpenAI's error types
};
std::string error_body(const ApiError& e);

struct ApiContext {
  const data::TextTokenizer* tokenizer = nullptr;
  std::string model;  // the served model's id (GET /v1/models)
  int context = 0;    // model.seq_len
};

struct CompletionRequest {
  std::vector<int32_t> prompt;  // never empty: the end-of-text id for an empty prompt
  int max_tokens = 16;
  nn::SamplingConfig sampling;
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;     // stream_options.include_usage
  bool return_token_ids = false;  // choices[0].token_ids (vLLM's extension)
  bool ignore_eos = false;        // generate max_tokens whatever is drawn (vLLM's; benchmarks)
};

struct ParsedRequest {
  CompletionRequest request;
  std::optional<ApiError> error;
};
ParsedRequest parse_completion(const std::string& body, const ApiContext& ctx);

struct Usage {
  int prompt = 0, completion = 0;
};
// The whole answer of a request that did not stream.
std::string completion_body(const std::string& id, int64_t created, const std::string& model,
                            const std::string& text, const char* finish_reason, const Usage& usage,
                            const std::vector<int32_t>* token_ids);
// One event of a stream ("data: {...}\n\n"): text, and finish_reason on the
// last (null before); usage, when asked for, in a final chunk of its own.
std::string chunk_event(const std::string& id, int64_t created, const std::string& model,
                        const std::string& text, const char* finish_reason,
                        const std::vector<int32_t>* token_ids);
std::string usage_event(const std::string& id, int64_t created, const std::string& model,
                        const Usage& usage);
inline constexpr const char* kDoneEvent = "data: [DONE]\n\n";

// GET /v1/models.
std::string models_body(const std::string& model, int64_t created, int context);

}  // namespace crucible::serve
