// Requests made of parts (SPEC §4): a prefix, independent segments, a suffix. The composer
// turns them into a forward plan for the chosen mode, building and caching segment entries
// on the way, and runs the prefill; generation then continues from the returned state.
//
// Modes share one code path (Model::forward_plan):
//   full    every token computed in prompt order (the exact reference)
//   prefix  a radix tree over the parts' token ids keeps KV and linear-state checkpoints at
//           part boundaries (what SGLang / vLLM do for hybrid models): only an exact prefix
//           of parts is reused
//   hypic   each segment's entry (built standalone, cached in the SegmentStore) is composed:
//           seam tokens recomputed in context, then S ← T_body·S + S_body, cached K/V placed
//   naive   like hypic with S ← S + S_body (no T)
// Invariant: the cold path builds exactly the entries the warm path reads, so a request's
// output never depends on what was cached.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cache/prefix_cache.h"
#include "cache/segment_store.h"
#include "core/pic_mode.h"
#include "core/status.h"
#include "engine/tokenized_request.h"
#include "model/model.h"

namespace hypic {

// A missed segment's entry still arriving layer by layer (segment parallelism: a
// SegmentBuilder, engine/segment_builder.h): its slots fill in decoder-layer order and
// `gate` tells when each is in.
struct ArrivingEntry {
  const SegmentEntry* entry = nullptr;
  const EntryGate* gate = nullptr;
};
using ArrivingEntries = std::map<std::string, ArrivingEntry>;  // by segment key

struct ComposeOptions {
  PicMode mode = PicMode::kHypic;
  int seam = 8;
  std::string salt;  // tenant isolation: part of every segment key
  // Segments found here (by key) are composed from their arriving entries, layer l as soon
  // as every arriving entry has layer l, instead of being looked up or built: composition
  // overlaps the builds and transfers of segment parallelism. Counted as misses.
  const ArrivingEntries* arriving = nullptr;
  // Checked before each layer of every pass (and between prefix-mode parts): true ends the
  // prefill with kCancelled; nothing partial is stored (entries and prefix checkpoints
  // already complete stay). A client that left, a server's drain deadline.
  std::function<bool()> cancelled;
  // Diagnostic: false composes RoPE'd linear states without re-rotating them to their
  // position (see ForwardPlan::rerotate). Not part of a segment's key: entries are the same.
  bool rerotate = true;
  // Debugging: per-layer hidden states of the suffix (see ForwardPlan::trace_last_piece).
  std::vector<std::vector<float>>* trace_suffix = nullptr;
};

struct ComposeStats {
  int segments_hit = 0, segments_missed = 0;
  int64_t prompt_tokens = 0;
  int64_t reused_tokens = 0;      // tokens whose work came from a cache
  int64_t recomputed_tokens = 0;  // tokens run through the model for this request
  int64_t seam_tokens = 0;        // of which seam windows
  int64_t cached_new_tokens = 0;  // tokens this request put in a cache (bodies of missed segments, prefix checkpoints)
  double build_ms = 0;            // standalone builds of missed segments
  double prefill_ms = 0;          // the composition forward (or full / prefix prefill)
};

class Composer {
 public:
  // `store` (hypic / naive) and `prefix_cache` (prefix mode) may be shared across requests
  // and threads; both are internally synchronised.
  Composer(const Model& model, std::shared_ptr<SegmentStore> store,
           std::shared_ptr<PrefixCache> prefix_cache);

  // Prefills the prompt into `state` (fresh from model.new_state()) and returns the logits of
  // its last token: [V]. The segments' keys are the request's (made under opt.seam and
  // opt.salt: a request keyed otherwise is a programmer error).
  Status prefill(const TokenizedRequest& req, const ComposeOptions& opt, SeqState* state,
                 std::vector<float>* logits, ComposeStats* stats) const;

  // The cached entry for a segment (keyed under opt.seam and opt.salt; built and inserted
  // on a miss). `hit` tells whether it was cached. A segment without a body (empty key) is
  // an error: it has no entry.
  Result<SegmentStore::Pin> entry_for(const SegmentRef& segment, const ComposeOptions& opt,
                                      bool* hit) const;

 private:
  Status prefill_prefix_mode(const TokenizedRequest& req, const ComposeOptions& opt, SeqState* st,
                             std::vector<float>* logits, ComposeStats* stats) const;
  Status prefill_composed(const TokenizedRequest& req, const ComposeOptions& opt, SeqState* st,
                          std::vector<float>* logits, ComposeStats* stats) const;
  // The prefix, the segments (composed per opt.mode) and, with_suffix, the suffix in one plan;
  // logits of the last token only with the suffix.
  Status compose_head(const TokenizedRequest& req, const ComposeOptions& opt, bool with_suffix, SeqState* st,
                      std::vector<float>* logits, ComposeStats* stats) const;
  // seq[from, end) through the model after `st`, each part but the last checkpointed under `ns`.
  Status run_parts(const std::string& ns, const std::vector<const std::vector<int32_t>*>& seq, size_t from,
                   const ComposeOptions& opt, SeqState* st, std::vector<float>* logits, ComposeStats* stats) const;
  const Model& model_;
  std::shared_ptr<SegmentStore> store_;
  std::shared_ptr<PrefixCache> prefix_;
};

}  // namespace hypic
