#!/usr/bin/python3
"""N open, slowly paced SSE streams against pacelined: what each one costs.

Opens N concurrent streaming POST /v1/completions requests (asyncio, one
HTTP/1.1 connection each), paced at --pace tokens/s for --max-tokens
tokens, so every stream stays open for about max_tokens / pace seconds.
Phases (--phases, in the order given, each from its own baseline):

  disconnect  open N streams, sample once each has its first chunk and
              generation is over, then close every connection at once (a
              mass disconnect) and wait for the daemon to let go of them
  full        the same, but read every stream to `data: [DONE]` before
              closing it

Sampled at each phase's baseline (before), with all N open, and after all
closed: the daemon's RSS (/proc/PID/status VmRSS), open fds
(/proc/PID/fd) and threads (/proc/PID/status Threads), and (with a metrics
address) its gauges paceline_num_requests_running and _waiting,
paceline_kv_cache_blocks{state="used"}, paceline_pacer_streams and
paceline_pacer_buffered_tokens. "Open" is taken once every stream has its
first chunk and no sequence runs or waits (streams are paced after
generation: what is left is N connections and their buffered tokens), or
at --generate-deadline. "After" is taken once running, KV used and paced
streams are 0 and the fd count is back within 2 of the baseline, or at
--settle-deadline. Printed: the figures, and per open stream
(open - baseline) / N for RSS, fds and threads.

A cold daemon's first phase also grows RSS by what generation touches for
the first time (KV pool pages, engine buffers for a full batch); freed
heap is kept by the allocator and reused by the next phase. --warmup K
first sends K unpaced requests, --warmup-concurrency at a time, so that
the first phase's growth is what its open streams hold.

Either against a running daemon (--url, --api-key, --pid or found from the
port, --metrics-url), or with --pacelined BIN --model MODEL it starts one
with bench/sse_streams.textproto (every address on port 0) and stops it
with SIGTERM at the end. --json FILE writes every figure as JSON.
Exit status: 0 when every stream got its first chunk, every full stream
got [DONE], and the gauges went back to 0 in every phase; 1 otherwise.

Standard library only; run it with /usr/bin/python3.
"""

import argparse
import asyncio
import http.client
import json
import os
import pathlib
import re
import resource
import signal
import subprocess
import sys
import threading
import time
import urllib.parse

HERE = pathlib.Path(__file__).resolve().parent
DEFAULT_CONFIG = HERE / "sse_streams.textproto"
DEFAULT_KEY = "sse-streams-key"  # the tenant of sse_streams.textproto
GAUGES = {
    "running": ("paceline_num_requests_running", None),
    "waiting": ("paceline_num_requests_waiting", None),
    "kv_used": ("paceline_kv_cache_blocks", 'state="used"'),
    "paced_streams": ("paceline_pacer_streams", None),
    "buffered_tokens": ("paceline_pacer_buffered_tokens", None),
}
MAX_ERRORS_KEPT = 5


# --- The daemon's process ----------------------------------------------------


def proc_sample(pid):
    """{rss_kib, fds, threads} of process `pid` from /proc."""
    status = pathlib.Path(f"/proc/{pid}/status").read_text()
    rss = int(re.search(r"^VmRSS:\s+(\d+) kB", status, re.M).group(1))
    threads = int(re.search(r"^Threads:\s+(\d+)", status, re.M).group(1))
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    return {"rss_kib": rss, "fds": fds, "threads": threads}


def pid_listening_on(port):
    """The pid owning a TCP socket listening on `port`, or None."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = pathlib.Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(f[9])
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:[") and link[8:-1] in inodes:
                    return int(pid)
        except OSError:
            continue
    return None


class Daemon:
    """pacelined started by this script; its stderr drained by a thread."""

    def __init__(self, binary, model, config, extra, ready_timeout):
        cmd = [binary, "--config", str(config), "--model", model,
               "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
               "--metrics-listen", "127.0.0.1:0", "--allow-root"] + extra
        self.command = cmd
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE,
                                     start_new_session=True)
        self._text = []
        self._cond = threading.Condition()
        threading.Thread(target=self._drain, daemon=True).start()
        if not self._wait_for("pacelined: ready", ready_timeout):
            self.kill()
            raise RuntimeError("pacelined did not start:\n" + self.stderr())
        self.http = self._address(r"pacelined: http on (\S+)")
        self.metrics = self._address(r"pacelined: metrics on (\S+)/metrics")

    def _drain(self):
        for raw in self.proc.stderr:
            with self._cond:
                self._text.append(raw.decode("utf-8", "replace"))
                self._cond.notify_all()

    def stderr(self):
        with self._cond:
            return "".join(self._text)

    def _wait_for(self, text, timeout):
        deadline = time.monotonic() + timeout
        with self._cond:
            while text not in "".join(self._text):
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    return False
                self._cond.wait(min(left, 0.5))
            return True

    def _address(self, pattern):
        match = re.search(pattern, self.stderr())
        if match is None:
            self.kill()
            raise RuntimeError(f"no /{pattern}/ line:\n{self.stderr()}")
        return match.group(1)

    def terminate(self, timeout=60):
        """SIGTERM; the exit code once it has drained."""
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def kill(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


# --- Prometheus gauges ---------------------------------------------------------


def scrape(metrics_addr, timeout=5):
    """The GAUGES' values (summed over their series) from /metrics."""
    host, port = metrics_addr.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
    finally:
        conn.close()
    values = {}
    for key, (name, label) in GAUGES.items():
        total = None
        for m in re.finditer(rf"^{name}(?:\{{([^}}]*)\}})? (\S+)$", text,
                             re.M):
            if label is None or label in (m.group(1) or ""):
                total = (total or 0) + float(m.group(2))
        values[key] = total
    return values


def gauges_zero(values):
    return all(values.get(k) == 0 for k in ("running", "kv_used",
                                             "paced_streams"))


# --- One stream ------------------------------------------------------------------


class Stream:
    """One streaming completion on its own connection."""

    def __init__(self):
        self.reader = None
        self.writer = None
        self.first_chunk = asyncio.Event()
        self.done = False  # got data: [DONE]
        self.text_chunks = 0
        self.usage = None
        self.error = None

    async def open(self, host, port, request):
        self.reader, self.writer = await asyncio.open_connection(host, port)
        self.writer.write(request)
        await self.writer.drain()
        status = await self.reader.readline()
        if b" 200 " not in status:
            head = await self.reader.read(2048)
            raise RuntimeError(f"{status!r} {head[:300]!r}")
        while (await self.reader.readline()) not in (b"\r\n", b""):
            pass

    async def _chunks(self):
        """The body's chunks (Transfer-Encoding: chunked)."""
        while True:
            size_line = await self.reader.readline()
            if not size_line:
                raise RuntimeError("connection closed mid-stream")
            size = int(size_line.split(b";")[0], 16)
            if size == 0:
                return
            data = await self.reader.readexactly(size + 2)
            yield data[:-2]

    def _event(self, data):
        if data == b"[DONE]":
            self.done = True
            return
        event = json.loads(data)
        if "error" in event:
            raise RuntimeError(f"error event: {event['error']}")
        if event.get("usage"):
            self.usage = event["usage"]
        if event.get("choices"):
            self.first_chunk.set()
            if any(c.get("text") for c in event["choices"]):
                self.text_chunks += 1

    async def read(self):
        """Reads events until [DONE] (or the connection closes)."""
        pending = b""
        async for chunk in self._chunks():
            pending += chunk
            while b"\n\n" in pending:
                event, pending = pending.split(b"\n\n", 1)
                for line in event.split(b"\n"):
                    if line.startswith(b"data: "):
                        self._event(line[6:])
                if self.done:
                    return

    def close(self):
        if self.writer is not None:
            self.writer.close()


async def run_stream(stream, host, port, request, connect_gate):
    """Opens `stream` and reads it to [DONE]; failures land in .error (and
    set .first_chunk, so no one waits for it)."""
    try:
        async with connect_gate:
            await stream.open(host, port, request)
        await stream.read()
    except (OSError, RuntimeError, ValueError,
            asyncio.IncompleteReadError) as e:
        stream.error = f"{type(e).__name__}: {e}"
        stream.first_chunk.set()


def completion_request(host, port, key, model, args, pace=None):
    body = {"prompt": args.prompt, "max_tokens": args.max_tokens,
            "stream": True, "stream_options": {"include_usage": True},
            "ignore_eos": True, "temperature": 0,
            "pace_tokens_per_s": args.pace if pace is None else pace}
    if model:
        body["model"] = model
    data = json.dumps(body).encode()
    head = (f"POST /v1/completions HTTP/1.1\r\nHost: {host}:{port}\r\n"
            f"Authorization: Bearer {key}\r\n"
            "Content-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n\r\n")
    return head.encode() + data


# --- A phase ---------------------------------------------------------------------


class Target:
    """Where the load goes and what is measured."""

    def __init__(self, url, key, pid, metrics, model):
        parsed = urllib.parse.urlsplit(url)
        self.host, self.port = parsed.hostname, parsed.port or 80
        self.key, self.pid, self.metrics, self.model = key, pid, metrics, model

    def gauges(self):
        return scrape(self.metrics) if self.metrics else {}


async def run_phase(name, target, args):
    """One phase's figures (see the module docstring)."""
    request = completion_request(target.host, target.port, target.key,
                                 target.model, args)
    result = {"phase": name, "baseline": proc_sample(target.pid),
              "gauges_baseline": target.gauges()}
    streams = [Stream() for _ in range(args.n)]
    gate = asyncio.Semaphore(args.connect_concurrency)
    t0 = time.monotonic()
    tasks = [asyncio.ensure_future(
        run_stream(s, target.host, target.port, request, gate))
        for s in streams]
    await wait_first_chunks(streams, args.first_chunk_deadline)
    result["first_chunk_s"] = round(time.monotonic() - t0, 2)
    result["first_chunks"] = sum(
        1 for s in streams if s.first_chunk.is_set() and s.error is None)
    result["generated_s"] = await wait_generated(target, args)
    result["open"] = proc_sample(target.pid)
    result["gauges_open"] = target.gauges()
    if name == "full":
        await asyncio.wait(tasks, timeout=args.full_deadline)
        result["done"] = sum(1 for s in streams if s.done)
        result["completion_tokens"] = sum(
            (s.usage or {}).get("completion_tokens", 0) for s in streams)
        result["text_chunks"] = sum(s.text_chunks for s in streams)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for s in streams:
        s.close()  # the mass disconnect (full: streams already done)
    result["closed_s"] = round(time.monotonic() - t0, 2)
    await settle(result, target, args)
    summarize(result, streams)
    return result


async def wait_first_chunks(streams, deadline_s):
    firsts = asyncio.gather(*(s.first_chunk.wait() for s in streams))
    try:
        await asyncio.wait_for(firsts, deadline_s)
    except asyncio.TimeoutError:
        pass


async def wait_generated(target, args):
    """Waits (at most --generate-deadline) until no sequence runs or waits:
    every stream is then only delivery (its tokens buffered, paced). The
    seconds it took; None at the deadline or without metrics."""
    if not target.metrics:
        return None
    start = time.monotonic()
    while time.monotonic() - start <= args.generate_deadline:
        g = target.gauges()
        if g.get("running") == 0 and g.get("waiting") == 0:
            return round(time.monotonic() - start, 2)
        await asyncio.sleep(0.1)
    return None


async def settle(result, target, args):
    """Waits (at most --settle-deadline) for the gauges to reach 0 and the
    fds to come back within 2 of the baseline; then the 'after' figures."""
    base_fds = result["baseline"]["fds"]
    start = time.monotonic()
    zero_s = None
    while time.monotonic() - start <= args.settle_deadline:
        if zero_s is None and (not target.metrics or
                               gauges_zero(target.gauges())):
            zero_s = round(time.monotonic() - start, 2)
        if zero_s is not None and \
                proc_sample(target.pid)["fds"] <= base_fds + 2:
            break
        await asyncio.sleep(0.1)
    result["gauges_zero_s"] = zero_s
    result["gauges_after"] = target.gauges()
    result["after"] = proc_sample(target.pid)
    result["after_s"] = round(time.monotonic() - start, 2)


def summarize(result, streams):
    errors = [s.error for s in streams if s.error]
    result["errors"] = len(errors)
    result["first_errors"] = errors[:MAX_ERRORS_KEPT]
    n = len(streams)
    result["per_stream"] = {
        k: round((result["open"][k] - result["baseline"][k]) / n, 3)
        for k in ("rss_kib", "fds", "threads")}


def phase_ok(r, n):
    ok = r["first_chunks"] == n and r["errors"] == 0
    if r["phase"] == "full":
        ok = ok and r["done"] == n
    return ok and r["gauges_zero_s"] is not None


def print_phase(r, n):
    b, o, a = r["baseline"], r["open"], r["after"]
    print(f"[{r['phase']}] N={n}: first chunks {r['first_chunks']}/{n} in "
          f"{r['first_chunk_s']} s, errors {r['errors']} "
          f"{r['first_errors'][:1]}")
    if r["phase"] == "full":
        print(f"  [DONE] {r['done']}/{n}, completion tokens "
              f"{r['completion_tokens']}, all closed at {r['closed_s']} s")
    print(f"  RSS KiB   baseline {b['rss_kib']}  open {o['rss_kib']}  "
          f"after {a['rss_kib']}  per stream {r['per_stream']['rss_kib']}")
    print(f"  fds       baseline {b['fds']}  open {o['fds']}  after "
          f"{a['fds']}  per stream {r['per_stream']['fds']}")
    print(f"  threads   baseline {b['threads']}  open {o['threads']}  after "
          f"{a['threads']}")
    print(f"  gauges open {r['gauges_open']}")
    print(f"  gauges after {r['gauges_after']} (zero after "
          f"{r['gauges_zero_s']} s)")


# --- Main --------------------------------------------------------------------


def parse_args(argv):
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=2000, help="streams (2000)")
    p.add_argument("--pace", type=float, default=1.0,
                   help="pace_tokens_per_s of each stream (1)")
    p.add_argument("--max-tokens", type=int, default=60,
                   help="tokens per stream (60: a minute at pace 1)")
    p.add_argument("--prompt", default="Once upon a time")
    p.add_argument("--phases", default="disconnect,full",
                   help="which phases, in order (disconnect,full)")
    p.add_argument("--url", help="http://HOST:PORT of a running daemon")
    p.add_argument("--api-key", default=DEFAULT_KEY)
    p.add_argument("--pid", type=int, help="the daemon's pid (default: the "
                   "process listening on --url's port)")
    p.add_argument("--metrics-url", help="HOST:PORT of its /metrics")
    p.add_argument("--pacelined", help="start this daemon instead")
    p.add_argument("--model", help="its --model (with --pacelined)")
    p.add_argument("--config", default=str(DEFAULT_CONFIG))
    p.add_argument("--daemon-arg", action="append", default=[],
                   help="one more daemon argument (repeatable)")
    p.add_argument("--warmup", type=int, default=0,
                   help="unpaced requests sent before the first baseline "
                   "(0)")
    p.add_argument("--warmup-concurrency", type=int, default=256,
                   help="warm-up requests at once (256: the scheduler's "
                   "max_running, so a full batch has run)")
    p.add_argument("--connect-concurrency", type=int, default=128,
                   help="connections being opened at once (128)")
    p.add_argument("--first-chunk-deadline", type=float, default=120)
    p.add_argument("--generate-deadline", type=float, default=120,
                   help="seconds for generation to finish once every "
                   "stream has its first chunk (the 'open' sample waits "
                   "for it)")
    p.add_argument("--full-deadline", type=float, default=600,
                   help="seconds for every full stream to reach [DONE]")
    p.add_argument("--settle-deadline", type=float, default=10,
                   help="seconds for the gauges and fds to come back")
    p.add_argument("--json", help="write the figures to this file")
    return p.parse_args(argv)


def raise_fd_limit(n):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n + 64:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def served_model(host, port, key):
    conn = http.client.HTTPConnection(host, port, timeout=10)
    try:
        conn.request("GET", "/v1/models",
                     headers={"Authorization": f"Bearer {key}"})
        body = json.loads(conn.getresponse().read())
    finally:
        conn.close()
    return body["data"][0]["id"]


async def warm_up(target, args):
    """--warmup requests, unpaced, --warmup-concurrency at a time: the
    engine, the scheduler and the KV pool see as many sequences as a phase
    does, while few connections are open at once. So a phase's RSS growth
    afterwards is what its open streams hold, not pages touched for the
    first time by generation. Returns how many failed."""
    request = completion_request(target.host, target.port, target.key,
                                 target.model, args, pace=0)
    gate = asyncio.Semaphore(args.warmup_concurrency)
    streams = [Stream() for _ in range(args.warmup)]

    async def one(stream):
        async with gate:
            await run_stream(stream, target.host, target.port, request,
                             asyncio.Semaphore(1))
            stream.close()

    await asyncio.gather(*(one(s) for s in streams))
    return sum(1 for s in streams if s.error or not s.done)


async def run_all(target, args):
    results = []
    if args.warmup:
        failed = await warm_up(target, args)
        print(f"warm-up: {args.warmup} unpaced requests, {failed} failed")
    for name in args.phases.split(","):
        r = await run_phase(name, target, args)
        print_phase(r, args.n)
        results.append(r)
    return results


def main(argv):
    args = parse_args(argv)
    if not set(args.phases.split(",")) <= {"disconnect", "full"}:
        sys.exit(f"--phases: disconnect and full only, got {args.phases}")
    raise_fd_limit(args.n)
    daemon = None
    if args.pacelined:
        daemon = Daemon(args.pacelined, args.model, args.config,
                        args.daemon_arg, ready_timeout=60)
        url, metrics, pid = f"http://{daemon.http}", daemon.metrics, \
            daemon.proc.pid
        print("daemon:", " ".join(daemon.command))
    else:
        if not args.url:
            sys.exit("--url or --pacelined is needed")
        url, metrics = args.url, args.metrics_url
        pid = args.pid or pid_listening_on(urllib.parse.urlsplit(url).port)
        if pid is None:
            sys.exit("no --pid, and no process listens on the port")
    try:
        parsed = urllib.parse.urlsplit(url)
        model = served_model(parsed.hostname, parsed.port, args.api_key)
        target = Target(url, args.api_key, pid, metrics, model)
        results = asyncio.run(run_all(target, args))
        exit_code = None
        if daemon is not None:
            exit_code = daemon.terminate()
    finally:
        if daemon is not None:
            daemon.kill()
    report = {"n": args.n, "pace": args.pace, "max_tokens": args.max_tokens,
              "pid": pid, "phases": results, "daemon_exit": exit_code}
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(report, indent=1))
    ok = all(phase_ok(r, args.n) for r in results) and exit_code in (None, 0)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
