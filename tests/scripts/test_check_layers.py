"""scripts/check_layers.py on small trees: a clean one passes, each kind of violation fails
with its file and line named."""
import pathlib
import subprocess
import sys
import tempfile
import unittest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "check_layers.py"
LAYERS = ["core", "kernels", "tokenizer", "model", "cache", "engine", "cluster", "server",
          "router", "bench", "cli"]


def run(tree: dict):
    with tempfile.TemporaryDirectory() as d:
        root = pathlib.Path(d)
        for layer in LAYERS:
            (root / "src" / layer).mkdir(parents=True)
        (root / "tests").mkdir()
        for rel, text in tree.items():
            p = root / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
        r = subprocess.run([sys.executable, str(SCRIPT), str(root)], capture_output=True,
                           text=True)
        return r.returncode, r.stdout


class CheckLayers(unittest.TestCase):
    def test_downward_includes_pass(self):
        rc, out = run({
            "src/model/model.h": '#include "core/status.h"\n#include "kernels/gemm.h"\n',
            "src/router/router.cpp": '#include "server/http_front.h"\n#include "hypic_cluster.pb.h"\n',
            "src/cli/main.cpp": '#include "router/router.h"\n#include <vector>\n',
            "src/cli/cmd_eval.cpp": '#include "bench/eval.h"\n',
            "src/bench/eval.cpp": '#include "cluster/scatter.h"\n#include "engine/compose.h"\n',
            "tests/model/test_x.cpp": '#include "common/testutil.h"\n#include "model/model.h"\n',
        })
        self.assertEqual(rc, 0, out)

    def test_upward_include_fails(self):
        rc, out = run({"src/model/model.cpp": '#include "core/log.h"\n#include "engine/compose.h"\n'})
        self.assertEqual(rc, 1)
        self.assertIn("model.cpp:2: model/ includes engine/compose.h", out)

    def test_sibling_layers_are_apart(self):
        rc, out = run({"src/tokenizer/bpe.cpp": '#include "kernels/gemm.h"\n'})
        self.assertEqual(rc, 1)
        self.assertIn("tokenizer/ includes kernels/gemm.h", out)

    def test_router_holds_no_model(self):
        rc, out = run({"src/router/router.cpp": '#include "model/model.h"\n'})
        self.assertEqual(rc, 1)
        self.assertIn("router/ includes model/model.h", out)

    def test_bench_is_below_cli(self):
        rc, out = run({"src/bench/eval.cpp": '#include "core/log.h"\n#include "cli/args.h"\n',
                       "src/bench/scatter.cpp": '#include "server/http_front.h"\n'})
        self.assertEqual(rc, 1)
        self.assertIn("eval.cpp:2: bench/ includes cli/args.h", out)
        self.assertIn("scatter.cpp:1: bench/ includes server/http_front.h", out)

    def test_generated_proto_is_cluster(self):
        rc, out = run({"src/engine/x.cpp": '#include "hypic_cluster.grpc.pb.h"\n'})
        self.assertEqual(rc, 1)
        self.assertIn("engine/ includes hypic_cluster.grpc.pb.h", out)

    def test_tests_follow_their_folder(self):
        rc, out = run({"tests/kernels/t.cpp": '#include "model/model.h"\n'})
        self.assertEqual(rc, 1)
        self.assertIn("kernels/ includes model/model.h", out)

    def test_unknown_folder_fails(self):
        rc, out = run({"src/dist/a.cpp": "\n"})
        self.assertEqual(rc, 1)
        self.assertIn("not a known layer", out)


if __name__ == "__main__":
    unittest.main()
