#!/usr/bin/python3
"""bench/sse_streams.py at CI size: 200 open paced SSE streams held by the
real pacelined on stories260K, a mass disconnect, then a full delivery.

What it asserts is what the HTTP server promises (server/http/
http_server.h: no thread per connection) and what a disconnect must do
(cancel, free, close): every stream got its first chunk; with 200 streams
open the daemon has at most 2 threads more than at its baseline and about
one fd per stream (N, give or take the baseline's closing connections, at
most N + 20); the paced-streams gauge counted all 200 at once; after the
mass disconnect the running, KV-used and paced-streams gauges are 0
within 10 s and the fds are back; the full delivery reads every stream
to [DONE] with its max_tokens of usage. The only times are deadlines.

Environment (set by ctest): PACELINED, the daemon binary;
PACELINE_SHARED_DIR, which holds models/stories260K.gguf (skips without).
"""

import json
import os
import pathlib
import subprocess
import tempfile
import unittest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "sse_streams.py"
PACELINED = os.environ.get("PACELINED", "")
SHARED_DIR = pathlib.Path(os.environ.get("PACELINE_SHARED_DIR", "/nonexistent"))
MODEL = SHARED_DIR / "models" / "stories260K.gguf"

N = 200
PACE = 4  # tokens/s: each stream is open ~10 s
MAX_TOKENS = 40


class SseStreamsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not MODEL.exists():
            raise unittest.SkipTest(f"no {MODEL}")
        if not PACELINED:
            raise unittest.SkipTest("PACELINED is not set")
        with tempfile.TemporaryDirectory() as tmp:
            out = pathlib.Path(tmp) / "sse.json"
            cls.run_result = subprocess.run(
                ["/usr/bin/python3", str(SCRIPT), "--pacelined", PACELINED,
                 "--model", str(MODEL), "--n", str(N), "--pace", str(PACE),
                 "--max-tokens", str(MAX_TOKENS), "--phases",
                 "disconnect,full", "--settle-deadline", "10",
                 "--first-chunk-deadline", "60", "--generate-deadline", "60",
                 "--full-deadline", "120", "--json", str(out)],
                capture_output=True, text=True, timeout=600)
            cls.report = (json.loads(out.read_text()) if out.exists()
                          else None)

    def setUp(self):
        self.assertIsNotNone(
            self.report, f"no report:\n{self.run_result.stdout}\n"
            f"{self.run_result.stderr}")

    def phase(self, name):
        for p in self.report["phases"]:
            if p["phase"] == name:
                return p
        self.fail(f"no phase {name}")

    def test_every_stream_got_its_first_chunk(self):
        for name in ("disconnect", "full"):
            p = self.phase(name)
            self.assertEqual(p["first_chunks"], N, name)
            self.assertEqual(p["errors"], 0, (name, p["first_errors"]))

    def test_all_streams_were_open_at_once(self):
        for name in ("disconnect", "full"):
            self.assertEqual(self.phase(name)["gauges_open"]["paced_streams"],
                             N, name)

    def test_no_thread_per_connection(self):
        for name in ("disconnect", "full"):
            p = self.phase(name)
            self.assertLessEqual(p["open"]["threads"],
                                 p["baseline"]["threads"] + 2, name)

    def test_about_one_fd_per_stream(self):
        for name in ("disconnect", "full"):
            p = self.phase(name)
            grown = p["open"]["fds"] - p["baseline"]["fds"]
            # Each open stream is one socket; the baseline may still hold
            # a closing connection or two (the /v1/models call, a scrape).
            self.assertGreaterEqual(grown, N - 2, name)
            self.assertLessEqual(grown, N + 20, name)

    def test_mass_disconnect_frees_everything(self):
        p = self.phase("disconnect")
        self.assertIsNotNone(p["gauges_zero_s"], p["gauges_after"])
        for gauge in ("running", "kv_used", "paced_streams"):
            self.assertEqual(p["gauges_after"][gauge], 0, gauge)
        self.assertLessEqual(p["after"]["fds"], p["baseline"]["fds"] + 2)

    def test_full_delivery_reaches_done(self):
        p = self.phase("full")
        self.assertEqual(p["done"], N)
        self.assertEqual(p["completion_tokens"], N * MAX_TOKENS)
        self.assertIsNotNone(p["gauges_zero_s"], p["gauges_after"])

    def test_daemon_drained_cleanly(self):
        self.assertEqual(self.report["daemon_exit"], 0)
        self.assertEqual(self.run_result.returncode, 0,
                         self.run_result.stdout + self.run_result.stderr)


if __name__ == "__main__":
    unittest.main()
