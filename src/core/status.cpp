#include "core/status.h"

namespace hypic {

const char* status_code_name(StatusCode c) {
  switch (c) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "INVALID_ARGUMENT";
    case StatusCode::kNotFound: return "NOT_FOUND";
    case StatusCode::kIoError: return "IO_ERROR";
    case StatusCode::kCorrupt: return "CORRUPT";
    case StatusCode::kUnsupported: return "UNSUPPORTED";
    case StatusCode::kOutOfRange: return "OUT_OF_RANGE";
    case StatusCode::kResourceExhausted: return "RESOURCE_EXHAUSTED";
    case StatusCode::kInternal: return "INTERNAL";
    case StatusCode::kCancelled: return "CANCELLED";
    case StatusCode::kUnavailable: return "UNAVAILABLE";
  }
  return "UNKNOWN";
}

std::string Status::to_string() const {
  if (is_ok()) return "OK";
  return std::string(status_code_name(code_)) + ": " + msg_;
}

void check_failed(const char* file, int line, const char* cond, const std::string& msg) {
  std::fprintf(stderr, "hypic: internal check failed at %s:%d: %s %s\n", file, line, cond,
               msg.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace hypic
