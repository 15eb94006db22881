#!/usr/bin/env python3
"""A bounded soak of the shared tier (loopback only, 45 s of load; $HYPIC_SOAK_SECONDS for longer): 16 clients send
inline-segment chats through the router, register segments on either instance, use them by
id through the router and delete some, while Redis is killed and restarted (with its
append-only file, as a production Redis keeps its data) and the scatter worker is stopped and
replaced. Every answer must be the single-instance answer (a reference server without Redis),
the only 5xx allowed is the documented 503 `registry_unavailable` while Redis is down, and
after the load every registration that was not deleted still answers on both instances and
through the router.

    python tests/server_py/test_soak.py --hypic-bin build/hypic [--source-dir .]
"""
import os
import random
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_openai_client as base  # noqa: E402 - parses --hypic-bin / --source-dir, SKIPs without openai
from test_openai_client import MODEL, HypicServer, http_json, seg_messages  # noqa: E402
from test_router import start_router, start_worker  # noqa: E402
from test_shared import Redis, doc  # noqa: E402

LOAD_S = float(os.environ.get("HYPIC_SOAK_SECONDS", "45"))
CLIENTS = 16
QUESTION = "Which instruments?"
SHAPES = [(1,), (2,), (3, 1), (4, 2), (5,), (0, 3)]  # inline requests: document indices
SALTS = ["tenant-a", "tenant-b"]


def chat(base_url, messages, salt):
    """(HTTP status, text or error object) of a greedy 6-token chat."""
    st, r = http_json("POST", base_url + "/v1/chat/completions",
                      {"model": MODEL, "messages": messages, "temperature": 0, "max_tokens": 6, "cache_salt": salt},
                      timeout=120)
    return st, (r["choices"][0]["message"]["content"] if st == 200 else r)


def by_id(sid):
    return [{"role": "user", "content": [{"type": "segment", "segment_id": sid}, {"type": "text", "text": QUESTION}]}]


class Soak(unittest.TestCase):
    def test_mixed_load_through_redis_and_worker_restarts(self):
        redis = Redis("--appendonly", "yes", "--appendfsync", "always")
        self.addCleanup(redis.cleanup)
        redis.start()
        router = start_router(self, "--segment-store", redis.url, secure=False)
        instances = []
        for _ in range(2):
            s = HypicServer("--segment-store", redis.url, "--grpc-port", "0", "--join", router.join)
            self.addCleanup(s.cleanup)
            s.start()
            instances.append(s)
        worker = [start_worker(self, router, secure=False)]
        ref = HypicServer()
        self.addCleanup(ref.cleanup)
        ref.start()
        docs = [doc("soak", i) for i in range(8)]
        # Single-instance answers: inline shapes per tenant, and each document registered by id.
        want_inline = {(shape, salt): chat(ref.base, seg_messages([docs[i] for i in shape], QUESTION), salt)[1]
                       for shape in SHAPES for salt in SALTS}
        want_id = {}
        for i, d in enumerate(docs):
            st, reg = http_json("POST", ref.base + "/v1/segments", {"text": d, "cache_salt": "r"})
            self.assertEqual(st, 200, reg)
            want_id[i] = chat(ref.base, by_id(reg["id"]), "r")[1]

        failures, counts, lock = [], {}, threading.Lock()
        # [id, doc index, salt, deleted, unsure] of every registration that succeeded. A DELETE
        # answered 503 while Redis died may have been carried out before the answer was lost:
        # its id is "unsure" until a 404 (by id or on a DELETE retried) settles it as deleted.
        owned = []
        stop = time.monotonic() + LOAD_S

        def note(kind, st, body=None):
            with lock:
                counts[(kind, st)] = counts.get((kind, st), 0) + 1
                if st >= 500 and not (st == 503 and isinstance(body, dict) and
                                      body.get("error", {}).get("code") == "registry_unavailable"):
                    failures.append("%s: %d %s" % (kind, st, body))

        def client(n):
            rng = random.Random(n)
            mine = []
            while time.monotonic() < stop:
                op = rng.random()
                salt = SALTS[n % 2]
                if op < 0.45:
                    shape = rng.choice(SHAPES)
                    st, got = chat(router.base, seg_messages([docs[i] for i in shape], QUESTION), salt)
                    note("inline", st, got)
                    if st == 200 and got != want_inline[(shape, salt)]:
                        failures.append("inline %r: %r, want %r" % (shape, got, want_inline[(shape, salt)]))
                elif (op < 0.6 or not mine) and len(mine) < 4:  # at most 4 live each: under --registered-mem
                    i = rng.randrange(len(docs))
                    st, reg = http_json("POST", rng.choice(instances).base + "/v1/segments",
                                        {"text": docs[i], "cache_salt": salt}, timeout=120)
                    note("register", st, reg)
                    if st == 200:
                        rec = [reg["id"], i, salt, False, False]
                        mine.append(rec)
                        with lock:
                            owned.append(rec)
                elif op < 0.9:
                    rec = rng.choice(mine)
                    sid, i, s = rec[0], rec[1], rec[2]
                    st, got = chat(router.base, by_id(sid), s)
                    note("by_id", st, got)
                    if st == 200 and got != want_id[i]:
                        failures.append("id %s: %r, want %r" % (sid, got, want_id[i]))
                    elif st == 404 and rec[4]:  # its unsure DELETE was carried out
                        rec[3] = True
                        mine.remove(rec)
                    elif st == 404:
                        failures.append("id %s: 404 while registered" % sid)
                elif mine:
                    rec = mine.pop(rng.randrange(len(mine)))
                    st, body = http_json("DELETE", rng.choice(instances).base + "/v1/segments/%s?cache_salt=%s"
                                         % (rec[0], rec[2]))
                    note("delete", st, body)
                    if st == 200 or (st == 404 and rec[4]):
                        rec[3] = True
                    else:
                        if st == 404:
                            failures.append("delete %s: 404 while registered" % rec[0])
                        rec[4] = rec[4] or st == 503
                        mine.append(rec)  # not deleted (or unsure): still ours

        threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
        for t in threads:
            t.start()
        # Faults, at fixed points of the load.
        time.sleep(LOAD_S * 0.2)
        redis.kill()
        time.sleep(LOAD_S * 0.15)
        redis.start()  # its append-only file brings every acknowledged write back
        time.sleep(LOAD_S * 0.15)
        worker[0].stop()
        time.sleep(LOAD_S * 0.1)
        worker.append(start_worker(self, router, secure=False))
        for t in threads:
            t.join()

        self.assertEqual(len(failures), 0, "%d failures, the first: %s; counts %s" % (len(failures), failures[:5], counts))
        for kind in ("inline", "register", "by_id"):
            self.assertGreater(counts.get((kind, 200), 0), 0, counts)
        # Nothing registered was lost: every live id answers everywhere; deleted ones are gone.
        for sid, i, salt, deleted, unsure in owned:
            if unsure and not deleted:  # either outcome, but the same everywhere
                st, _ = http_json("GET", instances[0].base + "/v1/segments/%s?cache_salt=%s" % (sid, salt))
                deleted = st == 404
            for s in instances:
                st, _ = http_json("GET", s.base + "/v1/segments/%s?cache_salt=%s" % (sid, salt))
                self.assertEqual(st, 404 if deleted else 200, (sid, deleted))
            if not deleted:
                st, got = chat(router.base, by_id(sid), salt)
                self.assertEqual((st, got), (200, want_id[i]), sid)
        sys.stderr.write("soak: %s; %d registrations, %d deleted\n"
                         % (sorted(counts.items()), len(owned), sum(1 for r in owned if r[3])))


if __name__ == "__main__":
    unittest.main(argv=base.UNITTEST_ARGV, verbosity=2)
