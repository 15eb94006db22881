#include "core/address.h"

namespace hypic {

std::string host_port(const std::string& host, int port) {
  const bool v6 = host.find(':') != std::string::npos && host.front() != '[';
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

}  // namespace hypic
