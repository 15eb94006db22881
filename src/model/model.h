// A loaded hybrid model (any registered architecture, model/arch.h) and its forward pass on
// the CPU: per decoder layer a token mixer and a channel mixer (model/mixer.h).
//
// Threading: a Model is immutable after load; forward() / decode_batch() may run concurrently
// on disjoint SeqStates (each call uses both cores through OpenMP / oneDNN).
#pragma once

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/status.h"
#include "entry/segment_entry.h"
#include "model/config.h"
#include "model/state.h"
#include "model/weights.h"

namespace hypic {

struct LoadOptions {
  // Matrix weights: kF32 (exact, matches the reference to fp32 rounding), kBF16 (AVX512-BF16
  // / AMX GEMMs, half the memory traffic), kQ8 (int8 per output channel) or kQ4 (4-bit groups
  // of 32), quantized at load (core/quant.h; decode on kernels/gemv.h). Vectors (norms, the
  // router, conv weights) stay fp32 and the embedding as stored, whatever the type.
  DType compute = DType::kBF16;
  bool progress = true;  // log loading progress for large checkpoints
  // When set, receives the checkpoint names of the tensors loaded as matrices (not the
  // embedding, norms, router or conv weights): what quantize_checkpoint quantizes.
  std::set<std::string>* matrix_names = nullptr;
};

enum class LogitsFor { kLast, kAll, kNone };

// How a cached segment body enters a linear layer's state (SPEC §4 modes).
enum class ComposeRule {
  kTransition,  // S ← T_body·S + S_body   (hypic)
  kNaive,       // S ← S + S_body          (the strawman, to show why T is needed)
};

// A forward pass over a prompt laid out in pieces, in prompt order (SPEC §4 "Forward"):
// computed pieces take the next `rows` of `tokens`; a cached piece composes a segment body
// from its entry (its seam tokens are a computed piece just before it). Positions run on
// from the state's position over both kinds.
// A cached body whose entry is still arriving layer by layer (segment parallelism,
// cluster/scatter.h). Before the pass reads the entry's data of decoder layer `layer` it calls
// wait(layer), which returns once that layer is in place; an error ends the pass with it
// (the sequence state is then unusable: discard it).
class EntryGate {
 public:
  virtual ~EntryGate() = default;
  virtual Status wait(int layer) const = 0;
};

struct ForwardPiece {
  int64_t rows = 0;                     // tokens computed (0 for a cached body)
  const SegmentEntry* entry = nullptr;  // set: compose this cached body
  const EntryGate* gate = nullptr;      // set: entry's layers are arriving (see EntryGate)
};
struct ForwardPlan {
  std::vector<int32_t> tokens;  // all computed tokens, concatenated in prompt order
  std::vector<ForwardPiece> pieces;
  ComposeRule rule = ComposeRule::kTransition;
  // A cached body was built at canonical positions; composing it elsewhere re-rotates what
  // carries RoPE: attention keys (and MLA's rope part) are rotated at their true positions, a
  // linear state whose keys carry RoPE (Ring-linear's Lightning layers) by the offset (SPEC
  // §2). false skips that: keys stay rotated at the canonical positions, states unrotated — a
  // diagnostic, to measure what re-rotation is worth.
  bool rerotate = true;
  // Debugging (--debug-deviation): when set, receives after every layer the hidden states
  // of the last computed piece, [rows, H] flattened, one vector per layer.
  std::vector<std::vector<float>>* trace_last_piece = nullptr;
  // Checked before each layer: true ends the pass with kCancelled, the state then holds a
  // partial pass (discard it). A client that left, a server's drain deadline.
  std::function<bool()> cancelled;
};

class Model {
 public:
  static Result<std::unique_ptr<Model>> load(const std::string& dir, const LoadOptions& opt);
  ~Model();

  const ModelConfig& config() const { return cfg_; }
  DType compute_type() const { return compute_; }
  const std::string& dir() const { return dir_; }

  // A fresh (empty) sequence state with KV room for `capacity` tokens (grows on demand).
  SeqState new_state(int64_t capacity = 256) const;
  // Grows the state's KV room to at least `tokens` positions (contents kept).
  void reserve(SeqState& s, int64_t tokens) const;
  // Whether `s` was made by this model's new_state (same layers, tensor names, dtypes and
  // shapes); the error says what to do.
  Status check_state(const SeqState& s) const;

  // Runs `tokens` ([L], L >= 1) at positions state.pos … state.pos + L − 1, updating the
  // state. logits: [1, V] (kLast), [L, V] (kAll) or untouched (kNone).
  // Errors: token id out of range, position beyond max_position_embeddings.
  Status forward(SeqState& state, const std::vector<int32_t>& tokens, LogitsFor which,
                 std::vector<float>* logits) const;
  // The same over a plan; logits refer to computed rows (kLast: the last computed token).
  Status forward_plan(SeqState& state, const ForwardPlan& plan, LogitsFor which,
                      std::vector<float>* logits) const;

  // One decode step for B = states.size() independent sequences (continuous batching):
  // token b goes to states[b] at its own position states[b]->pos, which then advances by one.
  // logits: [B, V], row b for sequence b. The matrix products (projections, MLP / MoE,
  // lm_head) run once over the B rows, so each weight is read once per step instead of B
  // times; the conv / delta-rule step, RoPE and attention over each sequence's own KV cache
  // run per sequence. B = 1 is bit-identical to forward(state, {token}, kLast); for B > 1 a
  // row can differ from its forward() by fp32 rounding (GEMM blocking depends on B).
  // Errors (nothing modified): B == 0, size mismatch, a null or repeated state, a state of
  // another model, a token id out of range, a state already at max_position_embeddings.
  Status decode_batch(const std::vector<SeqState*>& states, const std::vector<int32_t>& tokens,
                      std::vector<float>* logits) const;

  // Runs each kind of product the model needs once, on a fresh state: a 20-token prefill (the
  // GEMMs; oneDNN creates its primitives for the model's shapes) and a decode step (the
  // GEMVs). A kernel this CPU cannot run fails here, at start-up, with its message (the
  // commands that serve call it after loading) instead of in a request.
  Status self_test() const;

  // Segment entries (SPEC §4): a standalone prefill of `tokens` from zero state at positions
  // 0 … L−1 that keeps, per layer, what composing the body [seam, L) needs. Errors when the
  // segment is too short to have a body (see min_segment_tokens()).
  // on_layer (optional) is called as each decoder layer's data are complete in `partial`
  // (layers 0, 1, … in order, on the calling thread): what a worker streams while it builds.
  // cancelled (optional) is checked before each layer, as ForwardPlan::cancelled.
  Result<SegmentEntry> build_entry(
      const std::vector<int32_t>& tokens, int seam,
      const std::function<void(int layer, const SegmentEntry& partial)>& on_layer = nullptr,
      const std::function<bool()>& cancelled = nullptr) const;
  // Entries layer by layer (the wire form of segment parallelism). entry_layer: an entry with
  // e's key, length, seam and tokens and only decoder layer `layer`'s data (sharing e's
  // tensors). empty_entry: every layer present and empty (its mixer id set), to be filled by
  // set_entry_layer, which moves `part` (as entry_layer made it) into layer `layer` of `e`
  // after checking that it is one layer with this model's mixer and shapes and e's key,
  // length, seam and tokens (errors leave `e` unchanged).
  SegmentEntry entry_layer(const SegmentEntry& e, int layer) const;
  SegmentEntry empty_entry(const std::vector<int32_t>& tokens, int seam, std::string key) const;
  Status set_entry_layer(SegmentEntry* e, int layer, SegmentEntry&& part) const;
  // Whether `e` is, layer by layer, what build_entry makes for this model (mixers and
  // shapes, TokenMixer::check_entry); the error names the layer and what differs.
  Status check_entry(const SegmentEntry& e) const;
  // Shortest segment that gets an entry for a seam width: the body must extend past both
  // the seam and the history the mixers need (the conv window: K − 1 tokens). Shorter
  // segments are simply recomputed.
  int64_t min_segment_tokens(int seam) const;
  // Identifies the weights (config + checkpoint tensor table) for segment keys.
  const std::string& fingerprint() const { return fingerprint_; }

  // Floating-point operations of a forward over L new tokens after `past` tokens, counting
  // matrix products (2 per multiply-add; MoE counts the routed top-k + shared experts),
  // attention score/value products and the chunked delta rule. For throughput reports.
  double forward_flops(int64_t L, int64_t past, bool logits_last_only = true) const;

  const ModelWeights& weights() const { return w_; }

  // One forward pass's pieces, compose rule and optional entry capture (model/pass.h; what
  // the mixers walk; model-internal).
  struct Pass;

 private:
  Model() = default;
  // Runs the pass's pieces (each names its sequence) and advances every sequence's pos. A
  // kernel that throws (kernels::KernelError, bad_alloc) ends the pass with an internal error
  // whose message says what failed; the pass's sequences are then undefined (their owners
  // drop them) and the model is unchanged.
  Status run_pass(const std::vector<int32_t>& tokens, Pass& pass, LogitsFor which,
                  std::vector<float>* logits) const;
  Status run_layers(const std::vector<int32_t>& tokens, Pass& pass, LogitsFor which,
                    std::vector<float>* logits) const;
  // One layer per decoder layer (what an arriving entry is checked for before its layers are in).
  Status check_entry_layers(const SegmentEntry& e) const;

  ModelConfig cfg_;
  DType compute_ = DType::kF32;
  std::string dir_;
  ModelWeights w_;
  SeqState layout_;      // new_state's tensors as shapes only (no data), for check_state
  int64_t history_ = 0;  // the most history tokens any layer's mixer needs (min_segment_tokens)
  std::string fingerprint_;
};

}  // namespace hypic
