// Base64 (RFC 4648, standard alphabet, with padding).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hypic {

std::string base64_encode(const uint8_t* p, size_t n);
// Strict: canonical padding only, unused bits zero; false on anything else (out unspecified).
bool base64_decode(std::string_view s, std::vector<uint8_t>* out);

}  // namespace hypic
