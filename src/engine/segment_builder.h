// Builds a request's missed segment entries beside the composition (segment parallelism):
// the entries arrive layer by layer while Composer::prefill composes from them
// (ComposeOptions::arriving). cluster::Scatter implements it over remote workers and local
// lanes; the engine knows only this interface (engine sits below cluster).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cache/segment_store.h"
#include "core/status.h"
#include "engine/compose.h"
#include "engine/tokenized_request.h"

namespace hypic {

// How a call's missed entries were built (the usage's "scatter" object).
struct BuildFigures {
  int built_remote = 0, built_local = 0;
  int rescheduled = 0;  // moved to a local lane after their remote builder failed
  int corrupt = 0;      // entries rejected by verification, then rebuilt
};

// One request's builds in flight. Destroying it without wait() cancels what still builds
// and joins.
class BuildCall {
 public:
  virtual ~BuildCall() = default;
  // The missed segments' entries by key, filling layer by layer: ComposeOptions::arriving.
  // Valid until this object is destroyed.
  virtual const ArrivingEntries& arriving() const = 0;
  // Joins the builds; the pins of every segment the request composes (hits included), held
  // so nothing is evicted before the caller is done, or the first error. Call once.
  virtual Result<std::vector<SegmentStore::Pin>> wait() = 0;
  // After wait().
  virtual BuildFigures figures() const = 0;
};

class SegmentBuilder {
 public:
  virtual ~SegmentBuilder() = default;
  // Starts building the entries of the request's keyed segments that the store misses
  // (hypic / naive under `opt`; other modes start nothing). `req` and `opt` must outlive
  // the call. `workers`: the remote builders of this call (null: the builder's own). Safe
  // from any number of threads at once.
  virtual std::unique_ptr<BuildCall> start(const TokenizedRequest& req, const ComposeOptions& opt,
                                           const std::vector<std::string>* workers) = 0;
};

}  // namespace hypic
