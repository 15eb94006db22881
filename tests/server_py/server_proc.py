"""Helpers the server_py suites share (stdlib only): their own command-line flags, and
stopping a spawned process."""
import os
import signal
import subprocess


def parse_own_args(argv):
    """Takes --hypic-bin / --source-dir out of argv; the rest goes to unittest."""
    here = os.path.dirname(os.path.abspath(__file__))
    opts = {"hypic_bin": os.environ.get("HYPIC_BIN", ""),
            "source_dir": os.environ.get("HYPIC_SOURCE_DIR", os.path.normpath(os.path.join(here, "..", "..")))}
    rest = [argv[0]]
    i = 1
    while i < len(argv):
        a = argv[i]
        for flag, key in (("--hypic-bin", "hypic_bin"), ("--source-dir", "source_dir")):
            if a == flag and i + 1 < len(argv):
                opts[key] = argv[i + 1]
                i += 1
                break
            if a.startswith(flag + "="):
                opts[key] = a.split("=", 1)[1]
                break
        else:
            rest.append(a)
        i += 1
    return opts, rest


def terminate(proc, timeout=10.0):
    """SIGTERM (graceful), then SIGKILL if the process has not exited within `timeout`; the exit status."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    return proc.returncode
