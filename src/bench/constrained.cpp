#include "bench/constrained.h"

#include <algorithm>
#include <random>

#include "bench/forward.h"
#include "core/timer.h"
#include "engine/generate.h"
#include "engine/model_tokenizer.h"
#include "engine/prompt.h"
#include "grammar/json_schema.h"

namespace hypic::bench {

using nlohmann::json;

namespace {

const char* kSchema = R"({"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
    "unit": {"enum": ["celsius", "fahrenheit"]}, "notes": {"type": "array", "items": {"type": "string"}}},
    "required": ["city", "days", "unit", "notes"], "additionalProperties": false})";

json stats(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  return json{{"mean", v.empty() ? 0.0 : sum / double(v.size())}, {"median", v.empty() ? 0.0 : v[v.size() / 2]},
              {"max", v.empty() ? 0.0 : v.back()}};
}

}  // namespace

Result<json> run_constrained_bench(const ConstrainedBenchOptions& o) {
  LoadOptions lo;
  lo.compute = o.dtype;
  lo.progress = false;
  HYPIC_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::load(o.model, lo));
  HYPIC_ASSIGN_OR_RETURN(Tokenizer tok, load_model_tokenizer(o.model));
  const ModelConfig& cfg = model->config();
  const ToolFormat* f = model_chat_template(cfg).tool_format();
  // The JSON form whatever the family's: the same call for every model, comparable figures.
  const grammar::ToolCallFormat fmt = f ? grammar::ToolCallFormat{f->call_open, f->call_close, f->call_separator}
                                        : grammar::ToolCallFormat{"<tool_call>\n", "\n</tool_call>", "\n"};
  HYPIC_ASSIGN_OR_RETURN(std::shared_ptr<const grammar::Grammar> g,
                         grammar::tool_call_grammar(fmt, {{"get_weather", nlohmann::ordered_json::parse(kSchema)}}, true));
  json out{{"bench", "constrained"}, {"model", o.model}, {"dtype", dtype_name(o.dtype)},
           {"vocab_size", cfg.vocab_size}};

  // The mask along one call, position by position.
  const std::string call = fmt.open + R"({"name": "get_weather", "arguments": {"city": "Paris", "days": 3, "unit": "celsius", )"
                           R"("notes": ["bring an umbrella", "windy"]}})" + fmt.close;
  const std::vector<int32_t> ids = tok.encode(call, /*parse_special=*/false);
  TokenConstraint c(g, tok, eos_ids(cfg, tok));
  std::vector<uint8_t> mask;
  c.allowed_mask(&mask, cfg.vocab_size);  // builds the vocabulary trie (once per tokenizer)
  std::vector<double> full_us, check_us, allowed;
  for (int32_t id : ids) {
    Timer t;
    c.allowed_mask(&mask, cfg.vocab_size);
    full_us.push_back(t.ms() * 1e3);
    allowed.push_back(double(std::count(mask.begin(), mask.end(), uint8_t(1))));
    t.reset();
    const bool ok = c.allows(id);
    check_us.push_back(t.ms() * 1e3);
    if (!ok) return internal_error("bench constrained: the call's own token " + std::to_string(id) + " is not allowed");
    c.accept(id);
  }
  out["mask"] = {{"positions", ids.size()}, {"full_mask_us", stats(full_us)}, {"check_one_token_us", stats(check_us)},
                 {"allowed_tokens", stats(allowed)}};

  // Decode, free and constrained, interleaved.
  std::mt19937 rng(o.seed);
  const std::vector<int32_t> prompt = random_tokens(rng, o.prompt_tokens, std::min<int64_t>(cfg.vocab_size, tok.vocab_size()));
  json decode = json::object();
  for (const bool sampled : {false, true}) {
    std::vector<double> free_ms, con_ms, full_frac;
    int64_t con_tokens = 0;
    for (int rep = 0; rep < o.reps; ++rep)
      for (const bool constrained : {false, true}) {
        GenerateOptions go;
        go.max_tokens = o.tokens;
        go.stop_at_eos = constrained;  // free text runs to max_tokens; constrained text ends when the call is whole
        go.sampling.temperature = sampled ? 1.0f : 0.0f;
        go.sampling.seed = uint64_t(rep);
        if (constrained) go.grammar = g;
        HYPIC_ASSIGN_OR_RETURN(GenerateResult r, generate(*model, tok, prompt, go));
        const double n = double(r.tokens.size());
        if (n < 2) continue;
        (constrained ? con_ms : free_ms).push_back(r.decode_ms / (n - 1));
        if (constrained) {
          full_frac.push_back(double(r.full_masks) / n);
          con_tokens += int64_t(n);
        }
      }
    const json fs = stats(free_ms), cs = stats(con_ms);
    decode[sampled ? "temperature_1" : "greedy"] = {
        {"free_ms_per_token", fs}, {"constrained_ms_per_token", cs},
        {"overhead_median", fs["median"].get<double>() > 0 ? cs["median"].get<double>() / fs["median"].get<double>() : 0.0},
        {"full_mask_fraction", stats(full_frac)}, {"constrained_tokens", con_tokens}};
  }
  out["decode"] = decode;
  out["tokens"] = o.tokens;
  out["reps"] = o.reps;
  return out;
}

}  // namespace hypic::bench
