// The page GET / answers (src/server/ui/index.html, compiled in): chat over documents sent as
// segments, their reuse shown per answer.
#pragma once

namespace hypic::server {

const char* ui_page_html();

}  // namespace hypic::server
