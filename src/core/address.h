// Network addresses as the servers and clients here spell them.
#pragma once

#include <string>

namespace hypic {

// "host:port", with IPv6 literals bracketed ("[::1]:8080").
std::string host_port(const std::string& host, int port);

}  // namespace hypic
