#!/usr/bin/python3
"""A scripted OpenAI-compatible completions server (standard library only)
for `paceline bench --api openai` tests: GET /v1/models and streamed
POST /v1/completions over HTTP/1.1 keep-alive with chunked bodies.

It logs what it received, one JSON object per line, to --log: {"event":
"connection"} per TCP connection, {"event": "request", "method", "path",
"authorization", "body"} per request. It announces itself on stderr the way
pacelined does ("pacelined: listening on HOST:PORT", then "pacelined:
ready") so the tests' DaemonProcess can run it, and exits 0 on SIGTERM.

Options:
  --log FILE            the log above (required)
  --key KEY             answer 401 unless `Authorization: Bearer KEY`
  --vocab N             report meta.n_vocab N in /v1/models
  --no-usage            never send the usage chunk
  --split               send each event in 3-byte pieces, lines ending in
                        CRLF, after a comment line
  --tokens-per-chunk K  each text chunk stands for K tokens (usage counts
                        them all)
  --reject-every N      answer every N-th completion 429 (retry-after-ms 250)
  --tls-cert PEM --tls-key PEM  serve https with this certificate
"""

import argparse
import http.server
import json
import signal
import socket
import ssl
import sys
import threading

ARGS = None
LOG_LOCK = threading.Lock()
COUNT_LOCK = threading.Lock()
COMPLETIONS = [0]


def log(obj):
    with LOG_LOCK:
        with open(ARGS.log, "a", encoding="utf-8") as f:
            f.write(json.dumps(obj) + "\n")


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self):
        super().setup()
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        log({"event": "connection"})

    def log_message(self, *args):  # keep stderr for the announcement
        pass

    def send_json(self, status, obj, headers=()):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def error(self, status, message, code, headers=()):
        self.send_json(status, {"error": {"message": message,
                                          "type": "invalid_request_error",
                                          "param": None, "code": code}},
                       headers)

    def authorized(self):
        if ARGS.key and (self.headers.get("authorization") !=
                         "Bearer " + ARGS.key):
            self.error(401, "bad key", "invalid_api_key")
            return False
        return True

    def do_GET(self):
        log({"event": "request", "method": "GET", "path": self.path,
             "authorization": self.headers.get("authorization"),
             "body": None})
        if not self.authorized():
            return
        if self.path != "/v1/models":
            self.error(404, "no route", None)
            return
        model = {"id": "fake-model", "object": "model", "created": 0,
                 "owned_by": "tests"}
        if ARGS.vocab:
            model["meta"] = {"n_vocab": ARGS.vocab}
        self.send_json(200, {"object": "list", "data": [model]})

    def do_POST(self):
        length = int(self.headers.get("content-length", "0"))
        body = json.loads(self.rfile.read(length) or b"null")
        log({"event": "request", "method": "POST", "path": self.path,
             "authorization": self.headers.get("authorization"),
             "body": body})
        if not self.authorized():
            return
        if self.path != "/v1/completions":
            self.error(404, "no route", None)
            return
        with COUNT_LOCK:
            COMPLETIONS[0] += 1
            n = COMPLETIONS[0]
        if ARGS.reject_every and n % ARGS.reject_every == 0:
            self.error(429, "slow down", "rate_limit_exceeded",
                       [("retry-after-ms", "250"), ("retry-after", "1")])
            return
        self.stream(body)

    def chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def event(self, obj):
        text = obj if isinstance(obj, str) else json.dumps(obj)
        if not ARGS.split:
            self.chunk(("data: " + text + "\n\n").encode())
            return
        data = (": a comment\r\ndata: " + text + "\r\n\r\n").encode()
        for i in range(0, len(data), 3):
            self.chunk(data[i:i + 3])

    def stream(self, body):
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        prompt = body["prompt"]
        prompt_tokens = (len(prompt) if isinstance(prompt, list)
                         else len(prompt.split()))
        tokens = body["max_tokens"]
        k = ARGS.tokens_per_chunk
        base = {"id": "cmpl-1", "object": "text_completion", "created": 0,
                "model": body.get("model")}
        sent = 0
        while sent < tokens:
            take = min(k, tokens - sent)
            sent += take
            self.event(dict(base, choices=[{"index": 0, "text": "x" * take,
                                            "logprobs": None,
                                            "finish_reason": None}]))
        self.event(dict(base, choices=[{"index": 0, "text": "",
                                        "logprobs": None,
                                        "finish_reason": "length"}]))
        if not ARGS.no_usage:
            self.event(dict(base, choices=[], usage={
                "prompt_tokens": prompt_tokens, "completion_tokens": tokens,
                "total_tokens": prompt_tokens + tokens}))
        self.event("[DONE]")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--log", required=True)
    p.add_argument("--key", default="")
    p.add_argument("--vocab", type=int, default=0)
    p.add_argument("--no-usage", action="store_true")
    p.add_argument("--split", action="store_true")
    p.add_argument("--tokens-per-chunk", type=int, default=1)
    p.add_argument("--reject-every", type=int, default=0)
    p.add_argument("--tls-cert", default="")
    p.add_argument("--tls-key", default="")
    ARGS = p.parse_args()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if ARGS.tls_cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(ARGS.tls_cert, ARGS.tls_key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    server.daemon_threads = True
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(
        target=server.shutdown).start())
    host, port = server.server_address[:2]
    sys.stderr.write("pacelined: listening on %s:%d\npacelined: ready\n" %
                     (host, port))
    sys.stderr.flush()
    server.serve_forever()
    server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
