// ApiError: every failed HTTP request of the server, in OpenAI's error shape
// {"error": {"message", "type", "param", "code"}} with its HTTP status (docs/SERVER.md, Errors).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace ggflow::server {

struct ApiError {
  int status = 400;
  std::string type = "invalid_request_error";
  std::string code;      // machine-readable: invalid_value, missing_field, queue_full, ...
  std::string param;     // the request field at fault; empty: none
  std::string message;   // what is wrong and how to fix it

  nlohmann::json to_json() const {
    nlohmann::json e = {{"message", message}, {"type", type}, {"param", nullptr}, {"code", code}};
    if (!param.empty()) e["param"] = param;
    return {{"error", e}};
  }
};

// 400 invalid_request_error naming `param`.
inline ApiError invalid(std::string code, std::string param, std::string message) {
  return ApiError{400, "invalid_request_error", std::move(code), std::move(param), std::move(message)};
}

}  // namespace ggflow::server
