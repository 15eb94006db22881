// The HTTP front against request smuggling (tests/common/http_framing.h), the fuzzer choosing
// the pipeline: which well or badly framed requests, their bodies (each carrying a complete
// hidden request) and the pieces the bytes are written in. A real HttpFront on loopback, kept
// across inputs. Checks: every request up to the first badly framed one is answered in order
// with its whole body, the bad one gets 400 and nothing after it, and a hidden request is
// never run.
#include <fuzzer/FuzzedDataProvider.h>

#include "../common/http_framing.h"
#include "fuzz_common.h"

using namespace hypic::api::framing;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Front* front = new Front();  // lives as long as the process
  FuzzedDataProvider fdp(data, size);
  const Next rng = [&] { return fdp.ConsumeIntegral<uint32_t>(); };
  std::vector<Wire> wires;
  const int n = 1 + int(rng() % 6);
  for (int i = 0; i < n; ++i) wires.push_back(make_wire(int(rng() % 10), rng));
  const std::string err = check_pipeline(front->port(), wires, rng);
  FUZZ_CHECK(err.empty(), "%s", err.c_str());
  FUZZ_CHECK(front->smuggled() == 0, "a hidden request was run");
  return 0;
}
