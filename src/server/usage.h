// A completion's usage (api/result.h) from the request's figures (engine/runner.h): the
// prompt's token counts and PIC figures, the scatter figures when segment parallelism built
// its missed segments. completion_tokens is the generation's (set by the caller).
#pragma once

#include "api/result.h"
#include "engine/runner.h"

namespace hypic::server {

api::Usage usage_of(const RequestFigures& f);

}  // namespace hypic::server
