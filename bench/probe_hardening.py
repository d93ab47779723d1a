#!/usr/bin/python3
"""Hardening probes (issue 33) against a running pacelined, one binary a run.

Starts the given pacelined on loopback ephemeral ports with a config written
to a temp dir (a fresh daemon per probe, so RSS figures are independent),
runs the probes below, prints a table of figures and writes them as JSON:

  a  batch: one non-streamed /v1/completions of 64 prompts x n 16 x
     max_tokens 509 x logprobs 20 (ignore_eos): status, seconds, answer
     bytes, daemon RSS before / peak (100 ms samples) / 3 s after.
  b  JSON keys: bodies with 100,000 and 200,000 unknown top-level keys;
     status and seconds each, and a second tenant's one-token completion
     sent 0.2 s after the big body: its latency.
  c  smuggling: `Transfer-Encoding: xchunked` then a pipelined GET
     /v1/models in the same send; Content-Length + chunked with a GET after
     the last chunk. The status lines received (a 200 = the GET was served).
  d  chunk extension: a chunked POST whose first chunk line carries a 40 MB
     extension: status, bytes sent before the answer/close, RSS change.
  e  never-reading SSE: 20 streams (n 16, logprobs 5, max_tokens 480,
     SO_RCVBUF 4096), unread for 10 s: RSS growth, then cut vs completed.
  f  token budget: tokens_per_minute 3000, 8 concurrent max_tokens 500:
     answers within 20 s and their usage.
  g  drain: drain_timeout_seconds 5, 200 paced SSE streams (half never
     read), SIGTERM: seconds to exit, the "aborting N call(s)" log line.

Standard library only. Usage:
  /usr/bin/python3 bench/probe_hardening.py --pacelined build/server/pacelined \
      [--shared ../shared] [--out figures.json] [--only a,c] [--logdir DIR]
  /usr/bin/python3 bench/probe_hardening.py --compare old.json new.json
"""

import argparse
import atexit
import hashlib
import http.client
import json
import os
import re
import resource
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

KEYS = {"alpha": "probe-key-alpha", "beta": "probe-key-beta",
        "budget": "probe-key-budget"}
DAEMONS = []  # every Daemon started, killed at exit


def sha256(s):
    return hashlib.sha256(s.encode()).hexdigest()


def log(msg):
    print("[%s] %s" % (time.strftime("%H:%M:%S"), msg), file=sys.stderr,
          flush=True)


# ---------------------------------------------------------------- daemon


class Daemon:
    def __init__(self, binary, shared, tmpdir, name, server_extra="",
                 budget_tpm=0, logdir=None, http_extra=""):
        self.binary = binary
        self.name = name
        self.logdir = logdir
        model = os.path.join(shared, "models", "stories260K.gguf")
        tenants = ""
        for t in ("alpha", "beta"):
            tenants += 'tenants {\n  name: "%s"\n  api_key_sha256: "%s"\n}\n' % (
                t, sha256(KEYS[t]))
        if budget_tpm:
            tenants += ('tenants {\n  name: "budget"\n  api_key_sha256: "%s"\n'
                        '  tokens_per_minute: %d\n}\n' % (
                            sha256(KEYS["budget"]), budget_tpm))
        self.config = os.path.join(tmpdir, "%s.textproto" % name)
        with open(self.config, "w") as f:
            f.write('model { path: "%s" }\nlisten: "127.0.0.1:0"\n'
                    'http { listen: "127.0.0.1:0" %s}\n%s%s' % (
                        model, http_extra, server_extra, tenants))
        self.proc = None
        self.port = None
        self.ready = threading.Event()
        self.lines = []
        self.lock = threading.Lock()

    def start(self, timeout=120):
        self.proc = subprocess.Popen(
            [self.binary, "--config", self.config, "--allow-root"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE)
        DAEMONS.append(self)
        threading.Thread(target=self._read_stderr, daemon=True).start()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.ready.wait(0.1) and self.port:
                return
            if self.proc.poll() is not None:
                break
        raise RuntimeError("pacelined did not start (rc %s): %s" % (
            self.proc.poll(), self.stderr_text()[-2000:]))

    def _read_stderr(self):
        for raw in self.proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            with self.lock:
                self.lines.append(line)
            m = re.search(r"http on 127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
            if re.search(r"\bready\b", line):
                self.ready.set()

    def stderr_text(self):
        with self.lock:
            return "\n".join(self.lines)

    def rss_mb(self, field="VmRSS"):
        try:
            with open("/proc/%d/status" % self.proc.pid) as f:
                for line in f:
                    if line.startswith(field + ":"):
                        return int(line.split()[1]) / 1024.0
        except OSError:
            pass
        return None

    def stop(self, timeout=15):
        if self.proc is None or self.proc.poll() is not None:
            self._save_log()
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self._save_log()

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                pass

    def _save_log(self):
        if self.logdir:
            time.sleep(0.2)  # the stderr reader's last lines
            with open(os.path.join(self.logdir, self.name + ".log"), "w") as f:
                f.write(self.stderr_text() + "\n")


def kill_all():
    for d in DAEMONS:
        d.kill()


def kernel_queues(port):
    """(bytes queued to send on the daemon's sockets of `port`, bytes queued
    unread on their peers): the backlog the kernel holds, from
    /proc/net/tcp."""
    tx = rx = 0
    try:
        with open("/proc/net/tcp") as f:
            next(f)
            for line in f:
                cols = line.split()
                local, remote = cols[1], cols[2]
                txq, rxq = (int(x, 16) for x in cols[4].split(":"))
                if int(local.split(":")[1], 16) == port and cols[3] == "01":
                    tx += txq
                elif int(remote.split(":")[1], 16) == port and cols[3] == "01":
                    rx += rxq
    except OSError:
        pass
    return tx, rx


def cpu_seconds(pid):
    """The process's user + system CPU seconds."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return None


def wait_idle(d, deadline, busy_below=0.05):
    """Until the daemon used under `busy_below` CPU seconds in the last
    second, or `deadline`; whether it went idle."""
    last = cpu_seconds(d.proc.pid)
    while time.monotonic() < deadline:
        time.sleep(1)
        now = cpu_seconds(d.proc.pid)
        if now is None or last is None:
            return False
        if now - last < busy_below:
            return True
        last = now
    return False


class RssSampler:
    """Samples the daemon's VmRSS every 100 ms in a thread; keeps the peak."""

    def __init__(self, daemon):
        self.daemon = daemon
        self.peak = 0.0
        self.stop_ = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop_.is_set():
            r = self.daemon.rss_mb()
            if r is not None:
                self.peak = max(self.peak, r)
            self.stop_.wait(0.1)

    def stop(self):
        self.stop_.set()
        self.thread.join(2)
        return round(self.peak, 1)


def r1(x):
    return None if x is None else round(x, 1)


# ---------------------------------------------------------------- HTTP


def post(port, key, body, timeout=60.0, path="/v1/completions", keep=1 << 20):
    """POST `body` (bytes or dict); returns (status, seconds, body bytes,
    the first `keep` bytes of the body). Bounded by `timeout` overall."""
    if isinstance(body, dict):
        body = json.dumps(body).encode()
    start = time.monotonic()
    deadline = start + timeout
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", path, body=body, headers={
            "Authorization": "Bearer " + key,
            "Content-Type": "application/json", "Connection": "close"})
        resp = conn.getresponse()
        total = 0
        kept = []
        while True:
            if time.monotonic() > deadline:
                raise TimeoutError("answer not read within %.0f s" % timeout)
            chunk = resp.read(1 << 20)
            if not chunk:
                break
            total += len(chunk)
            if sum(len(k) for k in kept) < keep:
                kept.append(chunk)
        return resp.status, time.monotonic() - start, total, b"".join(kept)[:keep]
    finally:
        conn.close()


def warm_up(d):
    """One short completion, so first-use threads and pools are in the
    baseline."""
    status, _, _, _ = post(d.port, KEYS["alpha"],
                           {"prompt": "Once upon a time", "max_tokens": 8},
                           timeout=60)
    if status != 200:
        raise RuntimeError("warm-up answered %d" % status)


def raw_connect(port, rcvbuf=None, timeout=10):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(timeout)
    s.connect(("127.0.0.1", port))
    return s


def post_head(key, length=None, extra=""):
    h = ("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
         "Authorization: Bearer %s\r\nContent-Type: application/json\r\n" % key)
    if length is not None:
        h += "Content-Length: %d\r\n" % length
    return h + extra + "\r\n"


def read_until_quiet(s, deadline, quiet=3.0, cap=1 << 20):
    """Reads until the peer closes, `quiet` s pass with nothing, or
    `deadline`; returns (bytes, how it ended)."""
    data = b""
    end = "deadline"
    while time.monotonic() < deadline:
        r, _, _ = select.select([s], [], [],
                                min(quiet, max(0, deadline - time.monotonic())))
        if not r:
            end = "quiet"
            break
        try:
            chunk = s.recv(65536)
        except OSError as e:
            end = "error: %s" % e.__class__.__name__
            break
        if not chunk:
            end = "closed"
            break
        if len(data) < cap:
            data += chunk
    return data, end


def status_lines(data):
    return [m.decode() for m in re.findall(rb"HTTP/1\.[01] \d{3}[^\r\n]*", data)]


# ---------------------------------------------------------------- probes


def probe_a(ctx):
    d = ctx.daemon("a")
    warm_up(d)
    time.sleep(1)
    before = d.rss_mb()
    hwm_before = d.rss_mb("VmHWM")
    body = {"prompt": ["Once"] * 64, "n": 16, "max_tokens": 509,
            "logprobs": 20, "ignore_eos": True}
    raw = json.dumps(body, separators=(",", ":")).encode()
    sampler = RssSampler(d)
    try:
        status, secs, nbytes, head = post(d.port, KEYS["alpha"], raw,
                                          timeout=ctx.args.batch_timeout,
                                          keep=400)
        err = None
    except Exception as e:  # noqa: BLE001 - a figure, not a crash
        status, secs, nbytes, head, err = None, None, None, b"", repr(e)
    peak = sampler.stop()
    time.sleep(3)
    after = d.rss_mb()
    out = {"request_bytes": len(raw), "status": status, "seconds": r1(secs),
           "answer_bytes": nbytes, "rss_before_mb": r1(before),
           "rss_peak_mb": peak, "rss_after_3s_mb": r1(after),
           "vmhwm_before_mb": r1(hwm_before),
           "vmhwm_after_mb": r1(d.rss_mb("VmHWM"))}
    if status != 200:
        out["answer_head"] = head[:300].decode("utf-8", "replace")
    if err:
        out["error"] = err
    return out


def probe_b(ctx):
    d = ctx.daemon("b")
    warm_up(d)
    post(d.port, KEYS["beta"], {"prompt": "Once", "max_tokens": 1}, timeout=60)
    out = {}
    for n in (100000, 200000):
        body = ("{" + ",".join('"k%06d":0' % i for i in range(n)) +
                ',"prompt":"Once","max_tokens":1}').encode()
        big = {}
        small = {}
        sent = threading.Event()

        def send_big():
            start = time.monotonic()
            try:
                s = raw_connect(d.port, timeout=ctx.args.keys_timeout)
                s.sendall(post_head(KEYS["alpha"], len(body),
                                    "Connection: close\r\n").encode() + body)
                sent.set()
                data, _ = read_until_quiet(
                    s, start + ctx.args.keys_timeout, quiet=ctx.args.keys_timeout)
                s.close()
                lines = status_lines(data)
                big["status"] = int(lines[0].split()[1]) if lines else None
                big["seconds"] = time.monotonic() - start
                if big["status"] != 200 and b"\r\n\r\n" in data:
                    big["answer"] = data.split(b"\r\n\r\n", 1)[1][:200].decode(
                        "utf-8", "replace")
            except Exception as e:  # noqa: BLE001
                big["error"] = repr(e)
                sent.set()

        def send_small():
            try:
                st, secs, _, _ = post(d.port, KEYS["beta"],
                                      {"prompt": "Once", "max_tokens": 1},
                                      timeout=ctx.args.keys_timeout)
                small["status"], small["seconds"] = st, secs
            except Exception as e:  # noqa: BLE001
                small["error"] = repr(e)

        tb = threading.Thread(target=send_big, daemon=True)
        tb.start()
        sent.wait(30)
        time.sleep(0.2)
        ts = threading.Thread(target=send_small, daemon=True)
        ts.start()
        tb.join(ctx.args.keys_timeout + 5)
        ts.join(ctx.args.keys_timeout + 5)
        k = "%dk" % (n // 1000)
        out["%s_body_bytes" % k] = len(body)
        out["%s_status" % k] = big.get("status")
        out["%s_seconds" % k] = r1(big.get("seconds"))
        if "answer" in big:
            out["%s_answer" % k] = big["answer"]
        out["%s_other_tenant_status" % k] = small.get("status")
        out["%s_other_tenant_latency_s" % k] = (
            None if small.get("seconds") is None else round(small["seconds"], 2))
        for name, res in (("big", big), ("other", small)):
            if "error" in res:
                out["%s_%s_error" % (k, name)] = res["error"]
    return out


def probe_c(ctx):
    d = ctx.daemon("c")
    warm_up(d)
    key = KEYS["alpha"]
    get = ("GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n"
           "Authorization: Bearer %s\r\n\r\n" % key)
    out = {}
    # 1: an unknown transfer coding, no Content-Length.
    cases = {
        "xchunked": post_head(key, None, "Transfer-Encoding: xchunked\r\n") + get,
    }
    # 2: Content-Length covers "0\r\n\r\n" + the GET; chunked ends before it.
    inner = "0\r\n\r\n" + get
    cases["cl_plus_te"] = post_head(
        key, len(inner), "Transfer-Encoding: chunked\r\n") + inner
    for name, req in cases.items():
        try:
            s = raw_connect(d.port)
            s.sendall(req.encode())
            data, end = read_until_quiet(s, time.monotonic() + 10, quiet=2)
            s.close()
            lines = status_lines(data)
            out[name + "_status_lines"] = " | ".join(lines) or "(none)"
            out[name + "_smuggled_200"] = any(" 200" in l for l in lines)
            out[name + "_models_json_seen"] = b'"object":"list"' in data.replace(
                b" ", b"")
            out[name + "_end"] = end
            first = data.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in data else b""
            out[name + "_first_answer"] = first.split(b"HTTP/1.")[0][:160].decode(
                "utf-8", "replace")
        except Exception as e:  # noqa: BLE001
            out[name + "_error"] = repr(e)
    return out


def probe_d(ctx):
    d = ctx.daemon("d")
    warm_up(d)
    time.sleep(1)
    before = d.rss_mb()
    hwm_before = d.rss_mb("VmHWM")
    sampler = RssSampler(d)
    payload = b'{"prompt":"Once","max_tokens":1}'
    ext_bytes = ctx.args.ext_mb * 1000 * 1000
    piece = 1 << 16
    s = raw_connect(d.port, timeout=5)
    sent = 0
    stop_reason = "sent all"
    answered = b""
    start = time.monotonic()
    deadline = start + 60

    def server_spoke():
        r, _, _ = select.select([s], [], [], 0)
        return bool(r)

    try:
        parts = [post_head(KEYS["alpha"], None,
                           "Transfer-Encoding: chunked\r\n"
                           "Connection: close\r\n").encode(),
                 b"%x;ext=" % len(payload)]
        left = ext_bytes
        while left > 0:
            n = min(piece, left)
            parts.append(None)  # placeholder: n bytes of 'a'
            left -= n
        parts.append(b"\r\n" + payload + b"\r\n0\r\n\r\n")
        left = ext_bytes
        filler = b"a" * piece
        for p in parts:
            if p is None:
                n = min(piece, left)
                left -= n
                p = filler[:n]
            if server_spoke():
                stop_reason = "server answered/closed"
                break
            if time.monotonic() > deadline:
                stop_reason = "deadline"
                break
            try:
                s.sendall(p)
            except socket.timeout:
                stop_reason = "send blocked 5 s (server stopped reading)"
                break
            except OSError as e:
                stop_reason = "send failed: %s" % e.__class__.__name__
                break
            sent += len(p)
        send_secs = time.monotonic() - start
        try:
            answered, end = read_until_quiet(s, time.monotonic() + 30, quiet=10)
        except OSError as e:
            end = "error: %s" % e.__class__.__name__
    finally:
        s.close()
    peak = sampler.stop()
    time.sleep(3)
    after = d.rss_mb()
    lines = status_lines(answered)
    body = answered.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in answered else b""
    return {"extension_bytes": ext_bytes,
            "status": int(lines[0].split()[1]) if lines else None,
            "answer": body[:160].decode("utf-8", "replace"),
            "bytes_sent_before_answer_or_close": sent,
            "stop": stop_reason, "read_end": end,
            "send_seconds": r1(send_secs),
            "rss_before_mb": r1(before), "rss_peak_mb": peak,
            "rss_after_3s_mb": r1(after),
            "vmhwm_before_mb": r1(hwm_before),
            "vmhwm_after_mb": r1(d.rss_mb("VmHWM"))}


def sse_request(key, body):
    raw = json.dumps(body).encode()
    return post_head(key, len(raw), "Connection: close\r\n").encode() + raw


class SseReader:
    """Reads SSE answers on many sockets; per socket: bytes, whether a 200
    head came, [DONE], an error event, a 'reads too slowly' error."""

    def __init__(self, socks):
        self.socks = socks
        self.state = [{"bytes": 0, "head": b"", "tail": b"", "closed": False,
                       "done": False, "error_event": False, "too_slowly": False}
                      for _ in socks]

    def read(self, which, deadline, until):
        """Reads sockets `which` until `until(state)` holds for each (or it
        closed), or `deadline`."""
        live = {self.socks[i].fileno(): i for i in which}
        while live and time.monotonic() < deadline:
            r, _, _ = select.select(list(live), [], [],
                                    max(0, min(0.5, deadline - time.monotonic())))
            for fd in r:
                i = live[fd]
                st = self.state[i]
                try:
                    chunk = self.socks[i].recv(1 << 16)
                except OSError:
                    chunk = b""
                if not chunk:
                    st["closed"] = True
                    del live[fd]
                    continue
                st["bytes"] += len(chunk)
                if len(st["head"]) < 256:
                    st["head"] += chunk[:256]
                win = st["tail"] + chunk
                if b"data: [DONE]" in win:
                    st["done"] = True
                if b'"error"' in win:
                    st["error_event"] = True
                if b"reads too slowly" in win:
                    st["too_slowly"] = True
                st["tail"] = win[-512:]
                if until(st):
                    del live[fd]


def probe_e(ctx, name="e", http_extra="", logprobs=5):
    d = ctx.daemon(name, http_extra=http_extra)
    warm_up(d)
    time.sleep(1)
    before = d.rss_mb()
    sampler = RssSampler(d)
    req = sse_request(KEYS["alpha"], {
        "prompt": "Once upon a time", "stream": True, "n": 16,
        "logprobs": logprobs,
        "max_tokens": 480, "ignore_eos": True})
    socks = []
    for _ in range(ctx.args.sse_clients):
        s = raw_connect(d.port, rcvbuf=4096)
        s.sendall(req)
        socks.append(s)
    t_sent = time.monotonic()
    time.sleep(ctx.args.unread_seconds)
    at_10s = d.rss_mb()
    kq_10s = kernel_queues(d.port)
    # Then until generation ends (the daemon idle): the whole backlog.
    idle = wait_idle(d, t_sent + ctx.args.idle_timeout)
    idle_secs = time.monotonic() - t_sent
    at_idle = d.rss_mb()
    kq_idle = kernel_queues(d.port)
    reader = SseReader(socks)
    t0 = time.monotonic()
    reader.read(range(len(socks)), t0 + ctx.args.sse_read_timeout,
                lambda st: st["done"] or st["too_slowly"])
    read_secs = time.monotonic() - t0
    for s in socks:
        s.close()
    peak = sampler.stop()
    time.sleep(3)
    after = d.rss_mb()
    sts = reader.state
    heads = [st["head"].split(b"\r\n", 1)[0].decode("utf-8", "replace")
             for st in sts]
    return {"clients": len(socks), "rss_before_mb": r1(before),
            "rss_after_unread_%ds_mb" % ctx.args.unread_seconds: r1(at_10s),
            "rss_growth_unread_mb": r1(at_10s - before) if at_10s and before else None,
            "kernel_sendq_mb_at_%ds" % ctx.args.unread_seconds: r1(kq_10s[0] / 1e6),
            "daemon_idle_after_s": r1(idle_secs) if idle else "not idle in %ds" % ctx.args.idle_timeout,
            "rss_at_idle_mb": r1(at_idle),
            "kernel_sendq_mb_at_idle": r1(kq_idle[0] / 1e6),
            "client_recvq_mb_at_idle": r1(kq_idle[1] / 1e6),
            "rss_peak_mb": peak, "rss_after_close_3s_mb": r1(after),
            "cut_reads_too_slowly": sum(st["too_slowly"] for st in sts),
            "completed_done": sum(st["done"] and not st["too_slowly"]
                                  for st in sts),
            "other_error_event": sum(st["error_event"] and not st["too_slowly"]
                                     for st in sts),
            "neither": sum(not st["done"] and not st["error_event"] for st in sts),
            "mb_read_per_client_max": r1(max(st["bytes"] for st in sts) / 1e6),
            "mb_read_total": r1(sum(st["bytes"] for st in sts) / 1e6),
            "read_seconds": r1(read_secs),
            "first_status": sorted(set(heads))}


def probe_f(ctx):
    d = ctx.daemon("f", budget_tpm=3000)
    warm_up(d)  # as alpha: the budget tenant's bucket is fresh
    window = ctx.args.budget_window
    results = [None] * 8
    start = time.monotonic()

    def one(i):
        try:
            st, secs, _, body = post(
                d.port, KEYS["budget"],
                {"prompt": "Once upon a time", "max_tokens": 500,
                 "ignore_eos": True},
                timeout=max(0.1, start + window - time.monotonic()))
            usage = {}
            if st == 200:
                usage = json.loads(body).get("usage", {})
            results[i] = {"status": st, "seconds": secs, "usage": usage}
        except Exception as e:  # noqa: BLE001 - past the window
            results[i] = {"status": None, "error": e.__class__.__name__}

    threads = [threading.Thread(target=one, args=(i,), daemon=True)
               for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(window + 5)
    ok = [r for r in results if r and r["status"] == 200]
    statuses = {}
    for r in results:
        k = str(r["status"] if r else None)
        statuses[k] = statuses.get(k, 0) + 1
    comp = sum(r["usage"].get("completion_tokens", 0) for r in ok)
    prompt = sum(r["usage"].get("prompt_tokens", 0) for r in ok)
    return {"budget_per_minute": 3000, "window_s": window,
            "completed_in_window": len(ok), "statuses": statuses,
            "completion_tokens": comp, "prompt_tokens": prompt,
            "total_tokens": comp + prompt,
            "over_budget_pct": round(100.0 * (comp + prompt - 3000) / 3000, 1),
            "answer_seconds": sorted(round(r["seconds"], 1) for r in ok)}


def probe_g(ctx):
    d = ctx.daemon("g", server_extra="drain_timeout_seconds: 5\n")
    warm_up(d)
    n = ctx.args.drain_streams
    req = sse_request(KEYS["alpha"], {
        "prompt": "Once upon a time", "stream": True, "max_tokens": 400,
        "ignore_eos": True, "pace_tokens_per_s": 2})
    socks = []
    for i in range(n):
        # Odd streams are never read after their head: a small receive
        # buffer, so that their backlog reaches the daemon's socket.
        s = raw_connect(d.port, rcvbuf=4096 if i % 2 else None)
        s.sendall(req)
        socks.append(s)
    reader = SseReader(socks)
    t0 = time.monotonic()
    reader.read(range(n), t0 + 60, lambda st: b"\r\n\r\n" in st["head"])
    accepted = sum(st["head"].startswith(b"HTTP/1.1 200") for st in reader.state)
    accept_secs = time.monotonic() - t0
    time.sleep(3)
    # Odd streams are never read again; even ones are read throughout.
    stop_reading = threading.Event()
    read_thread = threading.Thread(target=lambda: reader.read(
        range(0, n, 2), time.monotonic() + 60,
        lambda st: stop_reading.is_set() or st["done"]), daemon=True)
    read_thread.start()
    t_term = time.monotonic()
    d.proc.send_signal(signal.SIGTERM)
    try:
        d.proc.wait(60)
        exit_secs = time.monotonic() - t_term
        rc = d.proc.returncode
    except subprocess.TimeoutExpired:
        exit_secs, rc = None, "still running after 60 s (killed)"
        d.kill()
    stop_reading.set()
    read_thread.join(5)
    time.sleep(0.3)
    text = d.stderr_text()
    m = re.search(r"aborting (\d+) call", text)
    took = re.search(r"the drain took (\S+)", text)
    for s in socks:
        s.close()
    read_states = reader.state[0::2]
    return {"streams": n, "accepted": accepted,
            "accept_seconds": r1(accept_secs),
            "exit_seconds_after_sigterm": None if exit_secs is None else round(exit_secs, 2),
            "exit_code": rc,
            "log_aborting_calls": int(m.group(1)) if m else None,
            "log_drain_took": took.group(1) if took else None,
            "read_streams_error_event": sum(st["error_event"] for st in read_states),
            "read_streams_closed": sum(st["closed"] for st in read_states)}


def probe_h(ctx):
    """e with the daemon's socket send buffers bounded (64 KiB), so that
    the backlog is the daemon's to hold (or cut), not the kernel's, and
    logprobs 20 (more bytes a token)."""
    return probe_e(ctx, "h", "send_buffer_bytes: 65536 ", logprobs=20)


PROBES = {"a": probe_a, "b": probe_b, "c": probe_c, "d": probe_d,
          "e": probe_e, "h": probe_h, "f": probe_f, "g": probe_g}
TITLES = {"a": "batch amplification", "b": "JSON keys", "c": "smuggling",
          "d": "chunk extension", "e": "never-reading SSE",
          "h": "never-reading SSE, send_buffer_bytes 65536, logprobs 20",
          "f": "token budget", "g": "drain"}


class Context:
    def __init__(self, args, tmpdir):
        self.args = args
        self.tmpdir = tmpdir
        self.current = []

    def daemon(self, name, **kw):
        d = Daemon(self.args.pacelined, self.args.shared, self.tmpdir, name,
                   logdir=self.args.logdir, **kw)
        d.start()
        self.current.append(d)
        return d

    def stop_all(self):
        for d in self.current:
            try:
                d.stop()
            except Exception:  # noqa: BLE001
                d.kill()
        self.current = []


# ---------------------------------------------------------------- output


def flatten(figures):
    rows = []
    for p in sorted(figures):
        for k, v in figures[p].items():
            if isinstance(v, (dict, list)):
                v = json.dumps(v, separators=(",", ":"))
            rows.append(("%s.%s" % (p, k), "" if v is None else str(v)))
    return rows


def print_table(figures, out=sys.stdout):
    rows = flatten(figures)
    w = max(len(r[0]) for r in rows) if rows else 10
    for name, v in rows:
        print("%-*s  %s" % (w, name, v), file=out)


def compare(old_path, new_path):
    with open(old_path) as f:
        old = json.load(f)
    with open(new_path) as f:
        new = json.load(f)
    o = dict(flatten(old["figures"]))
    n = dict(flatten(new["figures"]))
    names = list(o) + [k for k in n if k not in o]
    w = max(len(k) for k in names)
    wo = max([len(v) for v in o.values()] + [3])
    wo = min(wo, 60)
    print("%-*s  %-*s  %s" % (w, "figure", wo, "old", "new"))
    for k in names:
        print("%-*s  %-*s  %s" % (w, k, wo, o.get(k, "-"), n.get(k, "-")))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pacelined")
    ap.add_argument("--shared", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared"))
    ap.add_argument("--out", help="write the figures here as JSON")
    ap.add_argument("--only", default="abcdehfg", help="probes to run, e.g. a,c")
    ap.add_argument("--logdir", help="keep each daemon's stderr here")
    ap.add_argument("--compare", nargs=2, metavar=("OLD", "NEW"),
                    help="print two --out files side by side and exit")
    ap.add_argument("--batch-timeout", type=float, default=300)
    ap.add_argument("--keys-timeout", type=float, default=120)
    ap.add_argument("--ext-mb", type=int, default=40)
    ap.add_argument("--sse-clients", type=int, default=20)
    ap.add_argument("--unread-seconds", type=int, default=10)
    ap.add_argument("--idle-timeout", type=float, default=90,
                    help="e/h: the longest wait for generation to end")
    ap.add_argument("--sse-read-timeout", type=float, default=90)
    ap.add_argument("--budget-window", type=float, default=20)
    ap.add_argument("--drain-streams", type=int, default=200)
    args = ap.parse_args()
    if args.compare:
        compare(*args.compare)
        return 0
    if not args.pacelined:
        ap.error("--pacelined is required")
    args.pacelined = os.path.abspath(args.pacelined)
    if args.logdir:
        os.makedirs(args.logdir, exist_ok=True)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, 65536) if hard != resource.RLIM_INFINITY else 65536
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    atexit.register(kill_all)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: (kill_all(), os._exit(130)))

    figures = {}
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="probe_hardening.") as tmp:
        ctx = Context(args, tmp)
        for p in [c for c in args.only if c in PROBES]:
            log("probe %s (%s)" % (p, TITLES[p]))
            t = time.monotonic()
            try:
                figures[p] = PROBES[p](ctx)
            except Exception as e:  # noqa: BLE001 - record and go on
                figures[p] = {"error": repr(e)}
            finally:
                ctx.stop_all()
            figures[p]["probe_seconds"] = round(time.monotonic() - t, 1)
            log("  %s" % json.dumps(figures[p]))
    cpu = ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    result = {"pacelined": args.pacelined, "cpu": cpu,
              "cores": os.cpu_count(),
              "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
              "seconds": round(time.time() - started, 1),
              "figures": figures}
    print_table(figures)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
