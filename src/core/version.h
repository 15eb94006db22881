// hypic's version ("0.37.0") and the commit it was built from ("1e74811", or "unknown").
#pragma once

namespace hypic {

const char* version();
const char* build_commit();

}  // namespace hypic
