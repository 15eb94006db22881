#include "core/version.h"

#include "hypic_commit.h"  // HYPIC_COMMIT, generated (scripts/commit.cmake)

#ifndef HYPIC_VERSION
#define HYPIC_VERSION "0.0.0"
#endif

namespace hypic {

const char* version() { return HYPIC_VERSION; }
const char* build_commit() { return HYPIC_COMMIT; }

}  // namespace hypic
