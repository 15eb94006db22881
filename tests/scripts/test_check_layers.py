"""scripts/check_layers.py on small trees: a clean one passes, each kind of violation fails
with its file and line named."""
import pathlib
import subprocess
import sys
import tempfile
import unittest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "check_layers.py"
LAYERS = ["core", "kernels", "tokenizer", "grammar", "api", "rpc", "kv", "checkpoint", "entry", "model", "cache",
          "engine", "cluster", "server", "router", "bench", "synthetic", "cli"]
# A CMakeLists.txt whose router links the api library alone.
CMAKE_OK = """
hypic_layer(hypic_core core Threads::Threads)
hypic_layer(hypic_model model hypic_core)
hypic_layer(hypic_engine engine hypic_model)
hypic_layer(hypic_api api hypic_core hypic_proto Boost::headers)  # no model
hypic_layer(hypic_server server hypic_api hypic_engine)
hypic_layer(hypic_router router hypic_api hypic_proto)
target_link_libraries(hypic PRIVATE hypic_router hypic_server)
"""


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
            "src/router/router.cpp": '#include "api/http_front.h"\n#include "hypic_cluster.pb.h"\n',
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
                       "src/bench/scatter.cpp": '#include "router/router.h"\n',
                       "src/bench/eval_tools.cpp": '#include "server/engine_request.h"\n'})
        self.assertEqual(rc, 1)
        self.assertIn("eval.cpp:2: bench/ includes cli/args.h", out)
        self.assertIn("scatter.cpp:1: bench/ includes router/router.h", out)
        self.assertNotIn("eval_tools.cpp", out)  # the tool eval runs the server's request path

    def test_generated_proto_is_its_own_layer(self):
        rc, out = run({"src/engine/x.cpp": '#include "hypic_cluster.grpc.pb.h"\n'})
        self.assertEqual(rc, 1)
        self.assertIn("engine/ includes hypic_cluster.grpc.pb.h", out)

    def test_api_holds_no_engine(self):
        rc, out = run({"src/api/request.h": '#include "core/pic_mode.h"\n#include "engine/compose.h"\n',
                       "src/router/r.cpp": '#include "api/request.h"\n#include "server/jobs.h"\n'})
        self.assertEqual(rc, 1)
        self.assertIn("request.h:2: api/ includes engine/compose.h", out)
        self.assertIn("r.cpp:2: router/ includes server/jobs.h", out)

    def test_router_linking_the_api_alone_passes(self):
        rc, out = run({"CMakeLists.txt": CMAKE_OK})
        self.assertEqual(rc, 0, out)

    def test_router_linking_the_model_fails(self):
        rc, out = run({"CMakeLists.txt": CMAKE_OK.replace(
            "hypic_layer(hypic_router router hypic_api hypic_proto)",
            "hypic_layer(hypic_router router hypic_server)")})
        self.assertEqual(rc, 1)
        self.assertIn("hypic_router links hypic_engine (hypic_router -> hypic_server -> "
                      "hypic_engine)", out)
        self.assertIn("hypic_router links hypic_model", out)

    def test_a_later_link_counts_too(self):
        rc, out = run({"CMakeLists.txt": CMAKE_OK + "target_link_libraries(hypic_api PUBLIC hypic_model)\n"})
        self.assertEqual(rc, 1)
        self.assertIn("hypic_router links hypic_model (hypic_router -> hypic_api -> hypic_model)", out)

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
