// hypic quantize: a model directory rewritten with int8 / q4 matrices (model/quantize_model.h).
#include <cstdio>

#include "checkpoint/gguf_hf.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "model/quantize_model.h"

namespace hypic::cli {

int cmd_quantize(int argc, char** argv) {
  Args a("hypic quantize --model DIR --dtype int8|q4 --out DIR2",
         "Writes DIR2: DIR's matrices quantized once (int8: one scale per output channel; q4:\n"
         "4-bit groups of 32 with f16 scales), stored as codes + scales tensors, every other\n"
         "tensor and file copied. Serve it with the same --dtype; it loads without converting.\n"
         "Sources: bf16 / f32 safetensors, or FP8 (F8_E4M3 with 128×128 weight_scale_inv).");
  a.opt("model", "DIR", "source model directory")
      .opt("dtype", "int8|q4", "the stored type", "q4")
      .opt("out", "DIR2", "output directory (must not exist; written as DIR2.partial first)");
  if (auto done = parse_command(a, argc, argv, "quantize", {"model", "out"})) return *done;
  auto dt = parse_dtype(a.str("dtype"));
  if (!dt) return report_error("quantize", dt.status());
  if (!dtype_packed(*dt))
    return report_error("quantize", invalid_argument("--dtype must be int8 or q4"));
  if (is_gguf_path(a.str("model")))
    return report_error("quantize", invalid_argument(
        "'" + a.str("model") + "' is a GGUF file: its weights are already in llama.cpp's types, which "
        "hypic serves as they are (hypic run|serve --model " + a.str("model") + "); quantize writes "
        "hypic's int8 / q4 from a Hugging Face directory"));
  QuantizeOptions o;
  o.dtype = *dt;
  if (Status s = quantize_model(a.str("model"), a.str("out"), o); !s)
    return report_error("quantize", s);
  std::printf("{\"out\":\"%s\",\"dtype\":\"%s\"}\n", a.str("out").c_str(), a.str("dtype").c_str());
  return 0;
}

}  // namespace hypic::cli
