// The HTTP front's flags, shared by `hypic serve` and `hypic router`.
#pragma once

#include "cli/args.h"
#include "api/http_front.h"

namespace hypic::cli {

// --max-connections, --max-connections-per-peer, --header-timeout, --body-timeout,
// --keep-alive-timeout, --write-timeout, --http-threads, --drain-timeout, --cors-origin,
// --https-cert, --https-key, --https-client-ca.
void add_http_flags(Args& a);
// Reads them (validated) into *o and *drain_timeout_ms.
Status read_http_flags(const Args& a, api::HttpFrontOptions* o, int* drain_timeout_ms);

}  // namespace hypic::cli
