"""Segments that outlive the process (`hypic serve --cache-dir`): registrations restored after a
SIGTERM and after a kill -9, the first request after a restart a hit, expired ids gone, deleted
ids staying deleted, entry files lost or damaged before a restart rebuilt, and a damaged
registry refused with a message naming it, a registry emptied to 0 bytes beside its entry files
refused, and a full disk that sheds cache files and recovers by itself. Separate processes over
loopback."""
import errno
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_openai_client as base  # noqa: E402 - parses --hypic-bin / --source-dir, SKIPs without openai
from test_openai_client import MODEL, HypicServer, http_json, hypic_usage, metrics_value  # noqa: E402

SUFFIX = ".seg.safetensors"


def doc(i):
    return ("Memory file %d. The keeper of lighthouse %d logs the weather every hour: wind from the "
            "%s, visibility %d miles, %d ships passed." % (i, i, ["north", "south", "east", "west"][i % 4], 3 + i % 9, i * 7 % 23))


class Durable(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="hypic-durable-")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def start(self, cache_dir=None):
        s = HypicServer("--cache-dir", cache_dir or self.dir)
        self.addCleanup(s.cleanup)
        s.start()
        return s

    def register(self, s, text, tenant, ttl=None):
        body = {"text": text, "cache_salt": tenant}
        if ttl is not None:
            body["ttl"] = ttl
        st, r = http_json("POST", s.base + "/v1/segments", body)
        self.assertEqual(st, 200, r)
        return r["id"]

    def ask(self, s, sid, tenant):
        """A chat that uses the segment by id: (text, usage.hypic)."""
        msgs = [{"role": "user", "content": [{"type": "segment", "segment_id": sid},
                                             {"type": "text", "text": "What did the keeper log?"}]}]
        r = s.client().chat.completions.create(model=MODEL, messages=msgs, temperature=0, max_tokens=4,
                                               extra_body={"cache_salt": tenant})
        return r.choices[0].message.content, hypic_usage(r.usage)

    def get(self, s, sid, tenant):
        st, _ = http_json("GET", s.base + "/v1/segments/%s?cache_salt=%s" % (sid, tenant))
        return st

    def restored(self, s):
        """(registered, from disk, rebuilt) from the start's summary line."""
        m = re.search(r"(\d+) segments restored in \d+ ms \((\d+) entries from disk, (\d+) rebuilt", s.log())
        self.assertIsNotNone(m, s.log())
        return tuple(int(x) for x in m.groups())

    def entry_files(self, cache_dir=None):
        return sorted(f for f in os.listdir(cache_dir or self.dir) if f.endswith(SUFFIX))

    def small_disk(self, mib):
        """A tmpfs of `mib` MiB mounted for this test (skips where mounting is not allowed)."""
        mnt = os.path.join(self.dir, "disk")
        os.mkdir(mnt)
        if os.geteuid() != 0:
            self.skipTest("a size-capped file system is mounted with mount(8), which needs root here")
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%dm" % mib, "hypic-test", mnt],
                           capture_output=True, text=True)
        if r.returncode != 0:
            self.skipTest("cannot mount a tmpfs here (%s): the full-disk case is not run" % r.stderr.strip())
        self.addCleanup(subprocess.run, ["umount", "-l", mnt], check=False)
        return mnt

    def test_sigterm_restart_keeps_every_unexpired_id_and_starts_warm(self):
        s = self.start()
        t0 = time.time()
        ids = []  # (id, tenant, expires_before_restart)
        for i in range(50):
            tenant = "t%d" % (i % 3)
            ttl = 1 if i % 5 == 0 else (3600 if i % 5 == 1 else None)
            ids.append((self.register(s, doc(i), tenant, ttl), tenant, ttl == 1))
        live = [x for x in ids if not x[2]]
        ref = {sid: self.ask(s, sid, tenant)[0] for sid, tenant, _ in live[:5]}
        # The short TTLs (1 s, unix seconds) must have passed before the restart.
        time.sleep(max(0.0, t0 + 2.2 - time.time()))
        self.assertEqual(s.stop(), 0, s.log())
        flush = [l for l in s.log_lines() if l.get("event") == "cache.flush"]
        self.assertEqual(len(flush), 1, s.log())
        self.assertFalse(flush[0]["timed_out"])
        self.assertEqual(flush[0]["failed"], 0)
        # Every registration's entry is on disk (written through at registration).
        self.assertGreaterEqual(len(self.entry_files()), len(live))

        s2 = self.start()
        self.assertEqual(self.restored(s2), (len(live), len(live), 0))
        for sid, tenant, expired in ids:
            self.assertEqual(self.get(s2, sid, tenant), 404 if expired else 200, sid)
            if not expired:
                self.assertEqual(self.get(s2, sid, "other-tenant"), 404)
        for sid, tenant, _ in live:
            text, h = self.ask(s2, sid, tenant)
            self.assertEqual((h["segments_hit"], h["segments_missed"]), (1, 0), (sid, h))
            if sid in ref:
                self.assertEqual(text, ref[sid])
        st, lst = http_json("GET", s2.base + "/v1/segments?cache_salt=t1")
        self.assertEqual(st, 200)
        self.assertEqual(sorted(x["id"] for x in lst["data"]), sorted(sid for sid, t, e in live if t == "t1"))

    def test_kill_9_keeps_the_registry_and_rebuilds_lost_entries(self):
        s = self.start()
        ids = [(self.register(s, doc(100 + i), "k"), "k") for i in range(10)]
        ref = {sid: self.ask(s, sid, t)[0] for sid, t in ids}
        deleted = ids.pop()
        st, _ = http_json("DELETE", s.base + "/v1/segments/%s?cache_salt=k" % deleted[0])
        self.assertEqual(st, 200)
        s.proc.kill()  # no drain, no flush
        s.proc.wait(timeout=10)
        s.proc = None
        files = self.entry_files()
        self.assertGreaterEqual(len(files), len(ids))
        # Entry files lost or damaged before the restart: the restart rebuilds them.
        os.unlink(os.path.join(self.dir, files[0]))
        with open(os.path.join(self.dir, files[1]), "r+b") as f:
            f.truncate(os.path.getsize(f.name) // 2)

        s2 = self.start()
        registered, from_disk, rebuilt = self.restored(s2)
        self.assertEqual(registered, len(ids))
        self.assertGreaterEqual(rebuilt, 1)  # two files gone, one of them perhaps the deleted id's
        self.assertEqual(from_disk + rebuilt, len(ids))
        self.assertEqual(self.get(s2, deleted[0], "k"), 404)
        for sid, t in ids:
            self.assertEqual(self.get(s2, sid, t), 200, sid)
            text, h = self.ask(s2, sid, t)
            self.assertEqual((h["segments_hit"], h["segments_missed"]), (1, 0), (sid, h))
            self.assertEqual(text, ref[sid])

    def test_a_damaged_registry_is_refused_and_left_alone(self):
        junk = b"this is not an sqlite database" * 100
        with open(os.path.join(self.dir, "registry.sqlite"), "wb") as f:
            f.write(junk)
        s = HypicServer("--cache-dir", self.dir)
        self.addCleanup(s.cleanup)
        with self.assertRaises(RuntimeError) as e:
            s.start()
        self.assertIn("registry.sqlite", str(e.exception))
        with open(os.path.join(self.dir, "registry.sqlite"), "rb") as f:
            self.assertEqual(f.read(), junk)

    def test_a_registry_emptied_beside_its_entry_files_is_refused(self):
        s = self.start()
        sid = self.register(s, doc(1), "k")
        self.assertEqual(s.stop(), 0, s.log())
        files = self.entry_files()
        self.assertGreaterEqual(len(files), 1)
        reg = os.path.join(self.dir, "registry.sqlite")
        os.truncate(reg, 0)  # a crash while it was created, a truncation
        s2 = HypicServer("--cache-dir", self.dir)
        self.addCleanup(s2.cleanup)
        with self.assertRaises(RuntimeError) as e:
            s2.start()
        self.assertIn("registry.sqlite", str(e.exception))
        self.assertIn("0 bytes", str(e.exception))
        self.assertEqual(os.path.getsize(reg), 0)  # nothing changed
        self.assertEqual(self.entry_files(), files)
        # Deleted on purpose: a fresh registry, the entry files kept as cache.
        os.unlink(reg)
        s3 = self.start()
        self.assertEqual(self.get(s3, sid, "k"), 404)
        self.assertEqual(self.register_status(s3, doc(2)), 200)

    def register_status(self, s, text):
        st, _ = http_json("POST", s.base + "/v1/segments", {"text": text, "cache_salt": "k"})
        return st

    def test_a_full_disk_sheds_cache_files_and_recovers_by_itself(self):
        mnt = self.small_disk(16)
        s = self.start(mnt)
        ids = [self.register(s, doc(i), "k") for i in range(6)]
        self.assertEqual(len(self.entry_files(mnt)), 6)
        filler = os.path.join(mnt, "someone-elses-file")
        with open(filler, "wb") as f:  # fill the disk to the last byte
            try:
                while True:
                    f.write(b"\0" * 65536)
                    f.flush()
            except OSError as e:
                self.assertEqual(e.errno, errno.ENOSPC)
        # Registering on a full disk deletes the oldest cache files to make room.
        ids += [self.register(s, doc(10 + i), "k") for i in range(3)]
        self.assertGreater(metrics_value(s.base, "hypic_cache_disk_full_deletions_total"), 0)
        self.assertIn("is full: deleted the", s.log())
        self.assertLess(len(self.entry_files(mnt)), 9)
        gone = ids.pop(0)
        st, _ = http_json("DELETE", s.base + "/v1/segments/%s?cache_salt=k" % gone)
        self.assertEqual(st, 200)
        for sid in ids:
            self.assertEqual(self.get(s, sid, "k"), 200, sid)
        text, h = self.ask(s, ids[-1], "k")
        self.assertEqual((h["segments_hit"], h["segments_missed"]), (1, 0), h)
        # Space returns: entry files are written again, with no restart.
        os.unlink(filler)
        before = len(self.entry_files(mnt))
        ids.append(self.register(s, doc(20), "k"))
        self.assertEqual(len(self.entry_files(mnt)), before + 1)
        # Every acknowledged registration (and deletion) survives a kill -9.
        s.proc.kill()
        s.proc.wait(timeout=10)
        s.proc = None
        s2 = self.start(mnt)
        self.assertEqual(self.restored(s2)[0], len(ids))
        self.assertEqual(self.get(s2, gone, "k"), 404)
        for sid in ids:
            self.assertEqual(self.get(s2, sid, "k"), 200, sid)


if __name__ == "__main__":
    unittest.main(argv=base.UNITTEST_ARGV, verbosity=2)
