#!/usr/bin/env python3
"""The real pacelined's OpenAI-compatible HTTP API, from the standard library.

Only http.client, socket and json talk to the daemon; server-sent events are
read by this file's own parser (sse_events). The expected values come from
outside the daemon: the stories260K greedy oracle and its tokenization in
../shared/models/README.md, and OpenAI's published API shapes (error JSON,
chunk objects, the usage chunk, `data: [DONE]`).

Each class starts its own daemon on loopback ports (port 0; the addresses
are read from its "pacelined: http on", "metrics on" and "listening on"
lines) and ends it with SIGTERM, checking the exit status is 0.

Environment (the ctest openai_http_test sets both):
  PACELINED            the daemon binary
  PACELINE_SHARED_DIR  holds models/stories260K.gguf, models/README.md and
                       chat_templates/; the tests skip without them.
"""

import http.client
import json
import os
import pathlib
import re
import socket
import tempfile
import time
import sys
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "testing"))
from pacelined_process import PacelinedProcess  # noqa: E402
import stories260k_oracle  # noqa: E402

PACELINED = os.environ.get("PACELINED", "")
SHARED_DIR = pathlib.Path(os.environ.get("PACELINE_SHARED_DIR", "/nonexistent"))
MODEL = SHARED_DIR / "models" / "stories260K.gguf"
README = SHARED_DIR / "models" / "README.md"
TEMPLATE = SHARED_DIR / "chat_templates" / "Qwen-Qwen2.5-7B-Instruct.jinja"

KEY = "alice-test-key"
MODEL_ID = "stories260K"  # GET /v1/models: the file's base name
PROMPT = "Once upon a time"
PROMPT_IDS = [1, 403, 407, 261, 378]  # BOS + the SPM pieces, README.md
PROMPT_STRS = ["<s>", "\u2581Once", "\u2581upon", "\u2581a", "\u2581time"]
DEADLINE_S = 15.0  # every poll of the daemon's state gives up after this


def greedy64_oracle():
    """(text, ids) of the stories260K 64-token oracle (tests/testing)."""
    return stories260k_oracle.greedy64_oracle(README)


# --- Server-sent events ------------------------------------------------------

def sse_events(readline):
    """Yields each event's data from a text/event-stream.

    `readline()` returns the next line as bytes (b"" at the end). The
    WHATWG rules, for the `data` field: a line ends in \\n (a trailing \\r
    is dropped); a blank line dispatches the event; a line starting with
    ':' is a comment; "field: value" drops one space after the colon; the
    data lines of one event are joined with \\n; an event without data is
    not dispatched, and neither is an unterminated last event.
    """
    data = []
    while True:
        raw = readline()
        if not raw:
            return
        line = raw.decode("utf-8")
        if line.endswith("\n"):
            line = line[:-1]
        if line.endswith("\r"):
            line = line[:-1]
        if line == "":
            if data:
                yield "\n".join(data)
            data = []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "data":
            data.append(value)


class SseParserTest(unittest.TestCase):
    """The parser itself, on the spec's own cases (no daemon)."""

    def parse(self, text):
        lines = iter(text.encode("utf-8").splitlines(keepends=True))
        return list(sse_events(lambda: next(lines, b"")))

    def test_events_comments_and_multiline_data(self):
        text = (": a comment\n"
                "data: one\n\n"
                "event: x\r\ndata:two\r\ndata:  three\r\n\r\n"
                "id: 5\n\n"           # no data: not dispatched
                "data: tail\n")       # unterminated: not dispatched
        self.assertEqual(self.parse(text), ["one", "two\n three"])


# --- The daemon ----------------------------------------------------------------

class Daemon(PacelinedProcess):
    """pacelined with its HTTP and metrics ports read from stderr."""

    def __init__(self, args, ready_timeout=60.0):
        super().__init__(PACELINED, args, ready_timeout)
        self.http_port = self.port(r"http on \S+:(\d+)")
        self.metrics_port = self.port(r"metrics on \S+:(\d+)/metrics")


def wait_until(predicate, timeout=DEADLINE_S):
    """Polls predicate() until it is true or `timeout` passes; the last."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(0.02)


class DaemonTestCase(unittest.TestCase):
    """One daemon for the whole class (tenant alice, HTTP and metrics on)."""

    MODEL_ARG = None     # None: stories260K, skipping when it is absent
    EXTRA_ARGS = ()      # more pacelined flags
    CONFIG = None        # a config file's text, or None
    KV_MEMORY = "16MiB"  # --kv-memory

    @classmethod
    def setUpClass(cls):
        if not PACELINED or not os.access(PACELINED, os.X_OK):
            raise RuntimeError(f"PACELINED={PACELINED!r} is not executable")
        model = cls.MODEL_ARG
        if model is None:
            if not MODEL.is_file() or not README.is_file():
                raise unittest.SkipTest(f"no {MODEL}")
            model = str(MODEL)
        cls.tmp = tempfile.TemporaryDirectory()
        args = ["--model", model, "--listen", "127.0.0.1:0",
                "--http-listen", "127.0.0.1:0",
                "--metrics-listen", "127.0.0.1:0",
                "--kv-memory", cls.KV_MEMORY,
                "--tenant", f"alice:{KEY}", "--allow-root", *cls.EXTRA_ARGS]
        if cls.CONFIG is not None:
            config = pathlib.Path(cls.tmp.name) / "pacelined.textproto"
            config.write_text(cls.CONFIG, encoding="utf-8")
            args += ["--config", str(config)]
        cls.daemon = Daemon(args)

    @classmethod
    def tearDownClass(cls):
        try:
            if cls.daemon.proc.poll() is None:
                cls.daemon.sigterm()
                code = cls.daemon.wait()
                if code != 0:
                    raise AssertionError(f"pacelined exited {code}:\n"
                                         f"{cls.daemon.stderr_text()}")
        finally:
            cls.daemon.kill()
            cls.tmp.cleanup()

    # --- HTTP ----------------------------------------------------------------

    def connect(self):
        conn = http.client.HTTPConnection("127.0.0.1", self.daemon.http_port,
                                          timeout=60)
        self.addCleanup(conn.close)
        return conn

    def call(self, method, path, body=None, key=KEY, headers=None,
             conn=None):
        """One request; (status, headers as a dict of lower-case names,
        the body parsed as JSON, or its text when it is not JSON)."""
        conn = conn or self.connect()
        sent = dict(headers or {})
        if key is not None:
            sent["Authorization"] = f"Bearer {key}"
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body)
            sent["Content-Type"] = "application/json"
        conn.request(method, path, body=data, headers=sent)
        response = conn.getresponse()
        raw = response.read()
        answer_headers = {k.lower(): v for k, v in response.getheaders()}
        try:
            parsed = json.loads(raw)
        except ValueError:
            parsed = raw.decode("utf-8", "replace")
        return response.status, answer_headers, parsed

    def post(self, path, body, **kwargs):
        return self.call("POST", path, body, **kwargs)

    def stream(self, path, body, conn=None):
        """POSTs a streaming request; (status, headers, [event data])."""
        conn = conn or self.connect()
        conn.request("POST", path, body=json.dumps(body), headers={
            "Authorization": f"Bearer {KEY}",
            "Content-Type": "application/json"})
        response = conn.getresponse()
        headers = {k.lower(): v for k, v in response.getheaders()}
        if response.status != 200:
            return response.status, headers, [response.read().decode()]
        return 200, headers, list(sse_events(response.readline))

    def assert_error(self, answer, status, error_type, param=None,
                     code=None):
        """`answer` is `status` with OpenAI's error JSON of that type."""
        got_status, _, body = answer
        self.assertEqual(got_status, status, body)
        self.assertIsInstance(body, dict, body)
        self.assertEqual(set(body), {"error"}, body)
        error = body["error"]
        self.assertEqual(set(error), {"message", "type", "param", "code"},
                         error)
        self.assertIsInstance(error["message"], str)
        self.assertTrue(error["message"])
        self.assertEqual(error["type"], error_type, error)
        if param is not None:
            self.assertEqual(error["param"], param, error)
        if code is not None:
            self.assertEqual(error["code"], code, error)
        return error

    # --- Metrics -------------------------------------------------------------

    def metrics_text(self):
        """GET /metrics."""
        conn = http.client.HTTPConnection("127.0.0.1",
                                          self.daemon.metrics_port,
                                          timeout=30)
        try:
            conn.request("GET", "/metrics")
            return conn.getresponse().read().decode("utf-8")
        finally:
            conn.close()

    def metric_total(self, name):
        """`name` summed over all its series (0 when there is none)."""
        return sum(float(line.rsplit(" ", 1)[1])
                   for line in self.metrics_text().splitlines()
                   if line.startswith((name + "{", name + " ")))

    def metric(self, name, **labels):
        """The value of the one series of `name` whose labels include
        `labels`, from GET /metrics; None when there is none."""
        for line in self.metrics_text().splitlines():
            match = re.match(r"^(\w+)(?:\{(.*)\})? (\S+)$", line)
            if match is None or match.group(1) != name:
                continue
            have = dict(re.findall(r'(\w+)="([^"]*)"', match.group(2) or ""))
            if all(have.get(k) == v for k, v in labels.items()):
                return float(match.group(3))
        return None

    def idle(self):
        """Nothing running or waiting, no KV block used, no open stream."""
        return (self.metric("paceline_num_requests_running") == 0
                and self.metric("paceline_num_requests_waiting") == 0
                and self.metric("paceline_kv_cache_blocks", state="used") == 0
                and self.metric("paceline_pacer_streams") == 0)


def open_raw_stream(port, body):
    """Sends a streaming completion on a raw socket; the socket and a
    line reader over it (the answer's status line and headers come first,
    then the chunked SSE body as it arrives)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    payload = json.dumps(body).encode()
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                 b"Authorization: Bearer " + KEY.encode() + b"\r\n"
                 b"Content-Type: application/json\r\n"
                 b"Content-Length: " + str(len(payload)).encode() +
                 b"\r\n\r\n" + payload)
    return sock, sock.makefile("rb")


def read_to_first_event(reader):
    """Reads the raw answer up to its first `data: {` line (headers and
    chunk sizes are skipped); that line, or b"" when the answer ended."""
    line = reader.readline()
    while line and not line.startswith(b"data: {"):
        line = reader.readline()
    return line


class ApiTest(DaemonTestCase):
    """Routes, auth, errors, limits, keep-alive, completions and chat."""

    EXTRA_ARGS = ("--chat-template-file", str(TEMPLATE))
    CONFIG = "http { max_body_bytes: 2048 max_header_bytes: 2048 }\n"

    @classmethod
    def setUpClass(cls):
        if not TEMPLATE.is_file():
            raise unittest.SkipTest(f"no {TEMPLATE}")
        super().setUpClass()

    # --- Routes and auth -----------------------------------------------------

    def test_health_needs_no_key(self):
        status, _, body = self.call("GET", "/health", key=None)
        self.assertEqual(status, 200, body)

    # Every route the server has (server/openai/openai_service.cc's
    # AllowedMethod) but /health, which needs no key.
    KEYED_ROUTES = (
        ("GET", "/v1/models", None),
        ("GET", f"/v1/models/{MODEL_ID}", None),
        ("POST", "/v1/completions", {"prompt": PROMPT, "max_tokens": 2}),
        ("POST", "/v1/chat/completions",
         {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}),
        ("POST", "/tokenize", {"prompt": PROMPT}),
        ("POST", "/detokenize", {"tokens": [1, 2]}),
    )

    def test_missing_or_wrong_key_is_401(self):
        for key in (None, "not-a-key"):
            for method, path, body in self.KEYED_ROUTES:
                with self.subTest(key=key, path=path):
                    answer = (self.call("GET", path, key=key)
                              if method == "GET"
                              else self.post(path, body, key=key))
                    self.assert_error(answer, 401, "authentication_error")

    def test_models_lists_the_served_model(self):
        status, _, body = self.call("GET", "/v1/models")
        self.assertEqual(status, 200, body)
        self.assertEqual(body["object"], "list")
        self.assertEqual([m["id"] for m in body["data"]], [MODEL_ID])
        self.assertEqual(body["data"][0]["object"], "model")
        # stories260K has a 512-token vocabulary (shared/DESIGN.md §5).
        self.assertEqual(body["data"][0]["meta"]["n_vocab"], 512)
        self.assertGreater(body["data"][0]["max_model_len"], 0)
        self.assertEqual(body["data"][0]["max_model_len"],
                         body["data"][0]["meta"]["n_ctx_train"])
        status, _, one = self.call("GET", f"/v1/models/{MODEL_ID}")
        self.assertEqual(status, 200, one)
        self.assertEqual(one["id"], MODEL_ID)

    def test_unknown_route_and_unknown_model_are_404(self):
        self.assert_error(self.call("GET", "/v1/nothing"), 404,
                          "invalid_request_error")
        self.assert_error(self.call("GET", "/v1/models/no-such-model"), 404,
                          "invalid_request_error", code="model_not_found")
        self.assert_error(
            self.post("/v1/completions", {"model": "no-such-model",
                                          "prompt": PROMPT, "max_tokens": 2}),
            404, "invalid_request_error", code="model_not_found")
        self.assert_error(
            self.post("/v1/chat/completions", {
                "model": "no-such-model", "max_tokens": 2,
                "messages": [{"role": "user", "content": "hi"}]}),
            404, "invalid_request_error", code="model_not_found")

    def test_a_long_model_name_is_not_echoed_whole(self):
        name = "m" * 1500
        answer = self.post("/v1/completions", {"model": name,
                                               "prompt": PROMPT,
                                               "max_tokens": 2})
        self.assert_error(answer, 404, "invalid_request_error",
                          code="model_not_found")
        message = answer[2]["error"]["message"]
        self.assertLess(len(message), 300, message)
        self.assertIn("(1500 bytes)", message)

    def test_wrong_method_is_405_with_allow(self):
        answer = self.call("GET", "/v1/completions")
        self.assert_error(answer, 405, "invalid_request_error")
        self.assertEqual(answer[1].get("allow"), "POST")
        answer = self.post("/health", {}, key=None)
        self.assertEqual(answer[0], 405, answer)
        self.assertEqual(answer[1].get("allow"), "GET")

    # --- 400s naming the field -----------------------------------------------

    def test_bad_fields_are_400_naming_the_param(self):
        completion = {"prompt": PROMPT, "max_tokens": 2}
        chat = {"messages": [{"role": "user", "content": "hi"}],
                "max_tokens": 2}
        cases = [
            ("/v1/completions", {"temperature": -1}, "temperature"),
            ("/v1/completions", {"max_tokens": "x"}, "max_tokens"),
            ("/v1/completions", {"stop": [1]}, "stop[0]"),
            ("/v1/completions", {"n": 0}, "n"),
            ("/v1/completions", {"top_p": 2}, "top_p"),
            ("/v1/chat/completions", {"messages": [{"role": 1,
                                                    "content": "hi"}]},
             "messages[0].role"),
            ("/v1/chat/completions", {"temperature": "hot"}, "temperature"),
        ]
        for path, fields, param in cases:
            base = completion if path == "/v1/completions" else chat
            with self.subTest(path=path, fields=fields):
                self.assert_error(self.post(path, {**base, **fields}), 400,
                                  "invalid_request_error", param=param)

    # OpenAI answers 400 for a role outside system, developer, user,
    # assistant, tool, function, naming messages[0].role.
    def test_unknown_chat_role_is_400(self):
        self.assert_error(
            self.post("/v1/chat/completions", {
                "messages": [{"role": "bad", "content": "hi"}],
                "max_tokens": 2}),
            400, "invalid_request_error", param="messages[0].role")

    def test_unknown_response_format_type_is_400(self):
        # The JSON formats are served (structured_output_test.py).
        for path, base in (
                ("/v1/completions", {"prompt": PROMPT}),
                ("/v1/chat/completions",
                 {"messages": [{"role": "user", "content": "hi"}]})):
            with self.subTest(path=path):
                error = self.assert_error(
                    self.post(path, {**base, "max_tokens": 2,
                                     "response_format": {"type": "xml"}}),
                    400, "invalid_request_error",
                    param="response_format.type")
                self.assertIn("json_schema", error["message"])

    # --- Transport limits ----------------------------------------------------

    def test_body_over_the_limit_is_413(self):
        # `user` is an OpenAI field the server ignores: it makes the body
        # long without making the prompt long.
        body = {"prompt": PROMPT, "max_tokens": 2, "user": "u" * 4096}
        self.assert_error(self.post("/v1/completions", body), 413,
                          "invalid_request_error")
        # Just under the limit is served.
        body["user"] = "u" * 1900
        self.assertLess(len(json.dumps(body)), 2048)
        status, _, answer = self.post("/v1/completions", body)
        self.assertEqual(status, 200, answer)

    def test_http_refusals_are_counted_as_rejections(self):
        # Each refusal of a different layer: the route table (404), the
        # body's parser (400), the HTTP server's body limit (413).
        before = self.metric_total("paceline_rejections_total")
        self.assert_error(self.call("GET", "/v1/nothing"), 404,
                          "invalid_request_error")
        self.assert_error(
            self.post("/v1/completions", {"prompt": PROMPT, "max_tokens": 2,
                                          "temperature": "hot"}),
            400, "invalid_request_error", param="temperature")
        self.assert_error(
            self.post("/v1/completions", {"prompt": PROMPT, "max_tokens": 2,
                                          "user": "u" * 4096}),
            413, "invalid_request_error")
        self.assertEqual(self.metric_total("paceline_rejections_total") - before, 3)

    def test_a_prompt_over_the_context_is_context_length_exceeded(self):
        context = self.call("GET", f"/v1/models/{MODEL_ID}")[2][
            "max_model_len"]
        # The prompt alone (token ids: no tokenizer guesswork) ...
        error = self.assert_error(
            self.post("/v1/completions", {"prompt": [5] * (context + 1),
                                          "max_tokens": 1}),
            400, "invalid_request_error", code="context_length_exceeded")
        self.assertIn(str(context + 1), error["message"])
        # ... and a prompt that fits but not with max_tokens after it.
        error = self.assert_error(
            self.post("/v1/completions", {"prompt": [5] * (context - 4),
                                          "max_tokens": 16}),
            400, "invalid_request_error", code="context_length_exceeded")
        self.assertIn(str(context), error["message"])

    def test_headers_over_the_limit_are_431(self):
        self.assert_error(
            self.call("GET", "/v1/models", headers={"X-Big": "b" * 4096}),
            431, "invalid_request_error")

    def test_keep_alive_serves_several_requests_on_one_connection(self):
        conn = self.connect()
        local = None
        requests = [
            ("GET", "/health", None),
            ("GET", "/v1/models", None),
            ("POST", "/tokenize", {"prompt": PROMPT}),
            ("POST", "/v1/completions", {"prompt": PROMPT, "max_tokens": 4,
                                         "temperature": 0}),
            ("POST", "/v1/chat/completions", {
                "messages": [{"role": "user", "content": PROMPT}],
                "max_tokens": 4, "temperature": 0}),
            ("GET", "/v1/nothing", None),  # an error keeps it open too
            ("GET", "/v1/models", None),
        ]
        for method, path, body in requests:
            with self.subTest(path=path):
                status, _, answer = self.call(method, path, body, conn=conn)
                self.assertIn(status, (200, 404), answer)
                self.assertIsNotNone(conn.sock, "the server closed it")
                if local is None:
                    local = conn.sock.getsockname()
                self.assertEqual(conn.sock.getsockname(), local)
        # A stream on the same connection, then one more request.
        status, _, events = self.stream("/v1/completions", {
            "prompt": PROMPT, "max_tokens": 4, "stream": True}, conn=conn)
        self.assertEqual(status, 200, events)
        self.assertEqual(events[-1], "[DONE]")
        status, _, _ = self.call("GET", "/health", key=None, conn=conn)
        self.assertEqual(status, 200)
        self.assertEqual(conn.sock.getsockname(), local)

    # --- Completions ---------------------------------------------------------

    def check_chunks(self, events, obj, id_prefix):
        """The shape every streamed answer shares: JSON chunks of `obj`,
        one id and one `created` across them, then "[DONE]" once, last.
        Returns the chunks."""
        self.assertGreaterEqual(len(events), 2, events)
        self.assertEqual(events[-1], "[DONE]")
        self.assertEqual(events.count("[DONE]"), 1)
        chunks = [json.loads(e) for e in events[:-1]]
        ids = {c["id"] for c in chunks}
        self.assertEqual(len(ids), 1, ids)
        self.assertTrue(ids.pop().startswith(id_prefix))
        for c in chunks:
            self.assertEqual(c["object"], obj, c)
            self.assertEqual(c["model"], MODEL_ID, c)
            self.assertIs(type(c["created"]), int, c)
            self.assertGreater(c["created"], 0)
        self.assertEqual(len({c["created"] for c in chunks}), 1)
        return chunks

    def assert_same_usage(self, got, want):
        """The same token counts (a second run of one prompt may find it in
        the prefix cache, so cached_tokens may differ)."""
        for field in ("prompt_tokens", "completion_tokens", "total_tokens"):
            self.assertEqual(got[field], want[field], (got, want))
        self.assertIsInstance(got["prompt_tokens_details"]["cached_tokens"],
                              int)

    def test_completion_whole_and_streamed_give_the_oracle(self):
        text, _ = greedy64_oracle()
        request = {"model": MODEL_ID, "prompt": PROMPT, "max_tokens": 64,
                   "temperature": 0}
        status, _, whole = self.post("/v1/completions", request)
        self.assertEqual(status, 200, whole)
        self.assertEqual(whole["object"], "text_completion")
        self.assertTrue(whole["id"].startswith("cmpl-"))
        self.assertIs(type(whole["created"]), int)
        self.assertEqual(len(whole["choices"]), 1)
        choice = whole["choices"][0]
        self.assertEqual(choice["index"], 0)
        self.assertEqual(choice["text"], text)
        self.assertEqual(choice["finish_reason"], "length")
        self.assertEqual(whole["usage"]["prompt_tokens"], len(PROMPT_IDS))
        self.assertEqual(whole["usage"]["completion_tokens"], 64)
        self.assertEqual(whole["usage"]["total_tokens"], len(PROMPT_IDS) + 64)

        status, headers, events = self.stream("/v1/completions", {
            **request, "stream": True,
            "stream_options": {"include_usage": True}})
        self.assertEqual(status, 200, events)
        self.assertTrue(headers["content-type"].startswith(
            "text/event-stream"), headers)
        chunks = self.check_chunks(events, "text_completion", "cmpl-")
        usage_chunk, chunks = chunks[-1], chunks[:-1]
        self.assertEqual(usage_chunk["choices"], [])
        self.assert_same_usage(usage_chunk["usage"], whole["usage"])
        for c in chunks:
            self.assertIsNone(c["usage"], c)
            self.assertEqual([ch["index"] for ch in c["choices"]], [0])
        self.assertEqual("".join(c["choices"][0]["text"] for c in chunks),
                         text)
        reasons = [c["choices"][0]["finish_reason"] for c in chunks]
        self.assertEqual(reasons[-1], "length")
        self.assertEqual(set(reasons[:-1]), {None})

    def test_stream_without_include_usage_has_no_usage_chunk(self):
        status, _, events = self.stream("/v1/completions", {
            "prompt": PROMPT, "max_tokens": 8, "temperature": 0,
            "stream": True})
        self.assertEqual(status, 200, events)
        for c in self.check_chunks(events, "text_completion", "cmpl-"):
            self.assertNotEqual(c["choices"], [], c)
            self.assertIsNone(c.get("usage"), c)

    def test_prompt_as_token_ids_equals_prompt_as_text(self):
        answers = []
        for prompt in (PROMPT, PROMPT_IDS):
            status, _, body = self.post("/v1/completions", {
                "prompt": prompt, "max_tokens": 16, "temperature": 0})
            self.assertEqual(status, 200, body)
            answers.append(body["choices"][0]["text"])
        self.assertEqual(answers[0], answers[1])
        self.assertEqual(answers[0], greedy64_oracle()[0][:len(answers[0])])

    # --- Chat ----------------------------------------------------------------

    def test_chat_whole_and_streamed_agree(self):
        request = {"model": MODEL_ID, "max_tokens": 32, "temperature": 0,
                   "messages": [{"role": "system", "content": "Tell a story."},
                                {"role": "user", "content": PROMPT}]}
        status, _, whole = self.post("/v1/chat/completions", request)
        self.assertEqual(status, 200, whole)
        self.assertEqual(whole["object"], "chat.completion")
        self.assertTrue(whole["id"].startswith("chatcmpl-"))
        self.assertIs(type(whole["created"]), int)
        message = whole["choices"][0]["message"]
        self.assertEqual(message["role"], "assistant")
        self.assertIsInstance(message["content"], str)
        self.assertTrue(message["content"])
        finish = whole["choices"][0]["finish_reason"]
        self.assertIn(finish, ("stop", "length"))
        usage = whole["usage"]
        self.assertEqual(usage["total_tokens"],
                         usage["prompt_tokens"] + usage["completion_tokens"])

        status, _, events = self.stream("/v1/chat/completions", {
            **request, "stream": True,
            "stream_options": {"include_usage": True}})
        self.assertEqual(status, 200, events)
        chunks = self.check_chunks(events, "chat.completion.chunk",
                                   "chatcmpl-")
        usage_chunk, chunks = chunks[-1], chunks[:-1]
        self.assertEqual(usage_chunk["choices"], [])
        self.assert_same_usage(usage_chunk["usage"], usage)
        deltas = [c["choices"][0]["delta"] for c in chunks]
        self.assertEqual(deltas[0].get("role"), "assistant")
        self.assertTrue(all("role" not in d for d in deltas[1:]), deltas)
        self.assertEqual("".join(d.get("content") or "" for d in deltas),
                         message["content"])
        self.assertEqual(chunks[-1]["choices"][0]["finish_reason"], finish)
        self.assertTrue(all(c["choices"][0]["finish_reason"] is None
                            for c in chunks[:-1]))

    # --- Tokenize ------------------------------------------------------------

    def test_tokenize_and_detokenize_round_trip(self):
        status, _, body = self.post("/tokenize", {"prompt": PROMPT})
        self.assertEqual(status, 200, body)
        self.assertEqual(body["tokens"], PROMPT_IDS)
        self.assertEqual(body["count"], len(PROMPT_IDS))
        self.assertEqual(body["token_strs"], PROMPT_STRS)
        status, _, body = self.post("/tokenize", {
            "prompt": PROMPT, "add_special_tokens": False})
        self.assertEqual(status, 200, body)
        self.assertEqual(body["tokens"], PROMPT_IDS[1:])
        # The SPM prefix space of the first word is kept, as gRPC's
        # Detokenize and llama.cpp's /detokenize keep it.
        status, _, body = self.post("/detokenize", {"tokens": PROMPT_IDS})
        self.assertEqual(status, 200, body)
        self.assertEqual(body["prompt"], " " + PROMPT)
        # The oracle's generated ids read back as its text.
        text, ids = greedy64_oracle()
        status, _, body = self.post("/detokenize", {"tokens": ids})
        self.assertEqual(status, 200, body)
        self.assertEqual(body["prompt"], text)
        self.assert_error(self.post("/detokenize", {"tokens": [100000]}),
                          400, "invalid_request_error", param="tokens[0]")

    # --- Cancellation --------------------------------------------------------

    def test_client_closing_mid_stream_frees_its_stream(self):
        # stories260K generates the 60 tokens in milliseconds; delivery at
        # 5 tokens/s takes 12 s, so the stream is open when the client
        # closes its socket after the first event.
        self.assertTrue(wait_until(self.idle), "not idle at the start")
        sock, reader = open_raw_stream(self.daemon.http_port, {
            "prompt": PROMPT, "max_tokens": 60, "temperature": 0,
            "ignore_eos": True, "stream": True, "pace_tokens_per_s": 5})
        try:
            self.assertTrue(reader.readline().startswith(b"HTTP/1.1 200"))
            self.assertTrue(read_to_first_event(reader), "no first event")
            self.assertEqual(wait_until(
                lambda: self.metric("paceline_pacer_streams") == 1), True)
        finally:
            reader.close()
            sock.close()
        self.assertTrue(wait_until(self.idle),
                        "the closed stream still holds the server")
        self.assertEqual(self.metric("paceline_pacer_streams"), 0)
        self.assertEqual(
            self.metric("paceline_kv_cache_blocks", state="used"), 0)


class ServedNameTest(DaemonTestCase):
    """--served-model-name: the name and its aliases, and nothing else."""

    EXTRA_ARGS = ("--served-model-name", "tiny-stories,alias/one")

    def test_models_lists_the_name_and_its_aliases(self):
        status, _, body = self.call("GET", "/v1/models")
        self.assertEqual(status, 200, body)
        self.assertEqual([m["id"] for m in body["data"]],
                         ["tiny-stories", "alias/one"])
        status, _, one = self.call("GET", "/v1/models/alias/one")
        self.assertEqual((status, one.get("id")), (200, "alias/one"), one)

    def test_requests_may_use_any_served_name_but_no_other(self):
        for name in ("tiny-stories", "alias/one"):
            status, _, body = self.post("/v1/completions", {
                "model": name, "prompt": PROMPT, "max_tokens": 2})
            self.assertEqual(status, 200, body)
        self.assert_error(
            self.post("/v1/completions", {"model": MODEL_ID,
                                          "prompt": PROMPT, "max_tokens": 2}),
            404, "invalid_request_error", code="model_not_found")


class TenantIsolationTest(DaemonTestCase):
    """Tenants over HTTP: each key is its own tenant, and a prompt another
    tenant cached gives no cached tokens (the server's own count in usage,
    not wall time: the timing side channel stays shut)."""

    BOB_KEY = "bob-test-key"
    EXTRA_ARGS = ("--tenant", f"bob:{BOB_KEY}")
    # Several KV blocks of 16 tokens, so whole blocks can be cached.
    LONG = ("Once upon a time, there was a little girl named Lily. She "
            "loved to play outside in the park with her friends every day.")

    def cached(self, key):
        status, _, body = self.post(
            "/v1/completions",
            {"model": MODEL_ID, "prompt": self.LONG, "max_tokens": 1,
             "temperature": 0}, key=key)
        self.assertEqual(status, 200, body)
        self.assertGreater(body["usage"]["prompt_tokens"], 32)
        return body["usage"]["prompt_tokens_details"]["cached_tokens"]

    def test_a_prompt_another_tenant_cached_is_not_cached_for_you(self):
        first = self.cached(KEY)
        self.assertEqual(first, 0)
        self.assertGreater(self.cached(KEY), 0)  # alice's own cache
        self.assertEqual(self.cached(self.BOB_KEY), 0)  # not alice's
        self.assertGreater(self.cached(self.BOB_KEY), 0)  # bob's own now


class SlowModelTest(DaemonTestCase):
    """dummy:stories42m (no file needed) is slow enough on a CPU that a long
    request is still generating, holding KV blocks, when its client goes."""

    MODEL_ARG = "dummy:stories42m"
    KV_MEMORY = "64MiB"  # a whole 1024-token context is 32 MiB

    def test_client_closing_mid_generation_cancels_it(self):
        self.assertTrue(wait_until(self.idle), "not idle at the start")
        sock, reader = open_raw_stream(self.daemon.http_port, {
            "prompt": PROMPT, "max_tokens": 900, "temperature": 0,
            "ignore_eos": True, "stream": True, "pace_tokens_per_s": 10})
        try:
            # The answer opens once the request is accepted. (The dummy
            # vocabulary's tokens are mostly textless, so no event need
            # come: the metrics say it runs.)
            self.assertTrue(reader.readline().startswith(b"HTTP/1.1 200"))
            self.assertEqual(wait_until(lambda: (
                self.metric("paceline_num_requests_running") == 1
                and self.metric("paceline_kv_cache_blocks",
                                state="used") > 0)), True)
        finally:
            reader.close()
            sock.close()
        self.assertTrue(wait_until(self.idle),
                        "the cancelled request still runs or holds KV")
        self.assertEqual(self.metric("paceline_num_requests_running"), 0)
        self.assertEqual(
            self.metric("paceline_kv_cache_blocks", state="used"), 0)


class DrainTest(DaemonTestCase):
    """SIGTERM with a paced stream open: /health turns 503 while it drains,
    the stream still ends whole, and the daemon exits 0."""

    def test_health_is_503_while_draining_and_the_stream_ends_whole(self):
        conn = self.connect()
        conn.request("POST", "/v1/completions", body=json.dumps({
            # 4 s of delivery: /health is asked well before it ends.
            "prompt": PROMPT, "max_tokens": 40, "temperature": 0,
            "ignore_eos": True, "stream": True, "pace_tokens_per_s": 10}),
            headers={"Authorization": f"Bearer {KEY}",
                     "Content-Type": "application/json"})
        response = conn.getresponse()
        self.assertEqual(response.status, 200)
        events = sse_events(response.readline)
        first = json.loads(next(events))
        self.assertEqual(first["object"], "text_completion")
        self.daemon.sigterm()
        self.assertTrue(self.daemon.wait_for_stderr("draining", DEADLINE_S),
                        self.daemon.stderr_text())
        status = wait_until(lambda: self.call("GET", "/health", key=None)[0]
                            == 503)
        self.assertTrue(status, "/health did not turn 503")
        rest = list(events)
        self.assertEqual(rest[-1], "[DONE]")
        chunks = [first] + [json.loads(e) for e in rest[:-1]]
        self.assertEqual(chunks[-1]["choices"][0]["finish_reason"], "length")
        # 40 of the oracle's 64 greedy tokens: a prefix of its text.
        text = "".join(c["choices"][0]["text"] for c in chunks)
        self.assertTrue(text)
        self.assertTrue(greedy64_oracle()[0].startswith(text), text)
        self.assertLess(len(text), len(greedy64_oracle()[0]))
        self.assertEqual(self.daemon.wait(), 0, self.daemon.stderr_text())


if __name__ == "__main__":
    unittest.main(verbosity=2)
