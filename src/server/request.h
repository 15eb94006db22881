// OpenAI-compatible request parsing and validation (/v1/chat/completions, /v1/completions)
// and the mapping of a validated request onto the engine's prompt layout.
//
// Every violation is an ApiError: the OpenAI error object (message, type, param, code) plus
// the HTTP status to answer with. Parsing never throws and never aborts, whatever the bytes.
// Threading: pure functions, safe to call concurrently.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/compose.h"
#include "engine/generate.h"

namespace hypic {
class Tokenizer;
}

namespace hypic::server {

struct ApiError {
  int http_status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // "" -> null
  std::string code;   // "" -> null
  // {"error": {"message", "type", "param", "code"}}
  nlohmann::json to_json() const;
};

ApiError bad_request(std::string message, std::string param = "", std::string code = "");

enum class Endpoint { kChat, kCompletions };
enum class Role { kSystem, kUser, kAssistant };

struct ContentPart {
  std::string text;
  bool segment = false;  // cache_control {"type":"segment"} or "hypic_segment": true
};

struct Message {
  Role role = Role::kUser;
  std::vector<ContentPart> parts;
};

struct RequestLimits {
  size_t max_body_bytes = 8u << 20;
  int max_messages = 256;
  int max_segments = 64;
  int max_stop = 4;
  size_t max_stop_bytes = 256;
  int max_tokens = 4096;          // upper bound for max_tokens
  int default_max_tokens = 256;
  int max_seam = 1024;
  size_t max_salt_bytes = 256;
};

struct ApiRequest {
  Endpoint endpoint = Endpoint::kChat;
  std::string model;
  std::vector<Message> messages;  // chat
  std::string prompt;             // completions
  int max_tokens = 0;             // resolved (default applied)
  double temperature = 1.0;       // OpenAI default
  double top_p = 1.0;
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;
  std::string cache_salt;
  PicMode mode = PicMode::kHypic;
  int seam = 8;
  std::string user;
  int segment_count() const;
};

// Parses and validates a request body. On failure returns the error (status 400 or 413).
// The model name is checked by the caller (404 for an unknown model).
std::optional<ApiError> parse_request(std::string_view body, Endpoint ep,
                                      const RequestLimits& limits, ApiRequest* out);

// Sampling / stop options for the engine from a validated request.
GenerateOptions generate_options(const ApiRequest& r);

// Chat messages -> ChatML parts. System messages form the prefix turn; in the last user
// message, parts marked as segments become independent segments, text before the first one
// joins the prefix and text after the last one the suffix. Earlier turns are prefix. Text
// between two segments is not allowed (no place for it in the layout): 400.
// Completions prompt -> all of it in the prefix (plain prompt ids, no template).
// `max_prompt_tokens` (the context minus max_tokens) is checked after tokenisation.
std::optional<ApiError> build_prompt(const Tokenizer& tok, const ApiRequest& r,
                                     int64_t max_prompt_tokens, PromptParts* out);

// The ChatML text of a chat request (segments in place), for reference runs and logs.
std::string chatml_text(const ApiRequest& r);

}  // namespace hypic::server
