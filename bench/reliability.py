#!/usr/bin/env python3
"""Counts the hostile and failure cases the project's suites run, and how many pass: each
unittest test, or each of its subtests where it has them, is one case. Prints JSON (per
suite and in total, with the CPU) for docs/BENCHMARKS_SERVING.md's reliability section.

    .venv/bin/python bench/reliability.py --hypic-bin build/hypic [--out FILE]

Suites: tests/server_py/test_hostile.py (attacker input against `hypic serve` and
`hypic router`), test_durable.py (restarts, damaged and emptied registries, a full disk),
test_shared.py (Redis killed, restarted empty), test_router.py's Faults (instances killed,
stopped, full), and the C++ framing property test (tests/server/test_http_framing.cpp: one case
per pipeline it sends).
"""
import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, ".."))
SUITES = [("hostile", "test_hostile.py", []), ("durable", "test_durable.py", []),
          ("shared", "test_shared.py", []), ("router_faults", "test_router.py", ["Faults"])]


class Counting(unittest.TextTestResult):
    """A case per subtest where a test has them, else per test."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.cases = self.passed = self.skipped_cases = 0
        self._with_subtests = set()

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        self._with_subtests.add(test.id())
        self.cases += 1
        self.passed += err is None

    def addSuccess(self, test):
        super().addSuccess(test)
        if test.id() not in self._with_subtests:
            self.cases += 1
            self.passed += 1

    def _failed(self, test):
        if test.id() not in self._with_subtests:
            self.cases += 1

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._failed(test)

    def addError(self, test, err):
        super().addError(test, err)
        self._failed(test)

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self.skipped_cases += 1


def child(path, names):
    sys.path.insert(0, os.path.dirname(path))
    sys.argv = [path]
    name = os.path.splitext(os.path.basename(path))[0]
    mod = __import__(name)
    loader = unittest.defaultTestLoader
    suite = loader.loadTestsFromNames(names, mod) if names else loader.loadTestsFromModule(mod)
    runner = unittest.TextTestRunner(resultclass=Counting, verbosity=1, stream=sys.stderr)
    t0 = time.time()
    r = runner.run(suite)
    print(json.dumps({"tests": r.testsRun, "cases": r.cases, "passed": r.passed, "skipped": r.skipped_cases,
                      "failed": len(r.failures) + len(r.errors), "seconds": round(time.time() - t0, 1)}))


def cpu_name():
    with open("/proc/cpuinfo") as f:
        m = re.search(r"model name\s*:\s*(.*)", f.read())
    return m.group(1).strip() if m else platform.processor()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hypic-bin", required=True)
    ap.add_argument("--out", help="also write the JSON here")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return child(a.child[0], a.child[1:])
    env = dict(os.environ, HYPIC_BIN=os.path.abspath(a.hypic_bin), HYPIC_SOURCE_DIR=ROOT)
    out = {"cpu": cpu_name(), "date": time.strftime("%Y-%m-%d"), "suites": {}}
    for key, script, names in SUITES:
        p = subprocess.run([sys.executable, __file__, "--hypic-bin", a.hypic_bin, "--child",
                            os.path.join(ROOT, "tests", "server_py", script)] + names,
                           env=env, capture_output=True, text=True)
        last = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else "{}"
        out["suites"][key] = json.loads(last)
        print("%s: %s" % (key, last), file=sys.stderr)
    # The framing property test: one case per pipeline (its count is fixed in the test).
    test_server = os.path.join(os.path.dirname(os.path.abspath(a.hypic_bin)), "tests", "test_server")
    p = subprocess.run([test_server, "--gtest_filter=HttpFraming.*"], capture_output=True, text=True)
    with open(os.path.join(ROOT, "tests", "server", "test_http_framing.cpp")) as f:
        pipelines = int(re.search(r"round < (\d+);", f.read()).group(1))
    out["suites"]["http_framing"] = {"tests": 1, "cases": pipelines, "passed": pipelines if p.returncode == 0 else 0,
                                     "failed": 0 if p.returncode == 0 else pipelines, "skipped": 0}
    total = {k: sum(s.get(k, 0) for s in out["suites"].values()) for k in ("tests", "cases", "passed", "failed", "skipped")}
    out["total"] = total
    text = json.dumps(out, indent=1)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")
    return 0 if total["failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
