#!/usr/bin/env python3
"""Every generation endpoint of the HTTP server goes through the one
generation call (server/openai/generation_call.h): OpenAI's Chat
Completions and Responses and Anthropic's Messages get the same pacing,
tenant limits, cancellation when the client leaves, metrics and drain.
Each behaviour is checked on each endpoint against the real pacelined
(stories260K behind Qwen 2.5's chat template), from the daemon's own
metrics and answers; every poll has a deadline, no timing is asserted.
Environment: as openai_http_test.py.
"""

import hashlib
import json
import socket
import unittest

from openai_http_test import (DEADLINE_S, KEY, MODEL_ID, TEMPLATE,
                              DaemonTestCase, wait_until)

CAPPED_KEY = "capped-test-key"
# A tenant whose max_tokens limit is 8 (a request over it is the
# request's fault: 400 in each API's shape).
CONFIG = f"""
tenants {{
  name: "capped"
  api_key_sha256: "{hashlib.sha256(CAPPED_KEY.encode()).hexdigest()}"
  max_tokens_limit: 8
}}
"""


def body_for(endpoint, max_tokens, stream=False, pace=None):
    """A request for `endpoint` asking for `max_tokens`."""
    if endpoint == "/v1/chat/completions":
        body = {"model": MODEL_ID, "max_tokens": max_tokens,
                "messages": [{"role": "user", "content": "Tell a story."}]}
    elif endpoint == "/v1/responses":
        body = {"model": MODEL_ID, "max_output_tokens": max_tokens,
                "input": "Tell a story."}
    else:
        body = {"model": MODEL_ID, "max_tokens": max_tokens,
                "messages": [{"role": "user", "content": "Tell a story."}]}
    body["temperature"] = 0
    if stream:
        body["stream"] = True
    if pace is not None:
        body["pace_tokens_per_s"] = pace
    return body


ENDPOINTS = ("/v1/chat/completions", "/v1/responses", "/v1/messages")


class ParityTest(DaemonTestCase):

    EXTRA_ARGS = ("--chat-template-file", str(TEMPLATE))
    CONFIG = CONFIG

    @classmethod
    def setUpClass(cls):
        if not TEMPLATE.is_file():
            raise unittest.SkipTest(f"no {TEMPLATE}")
        super().setUpClass()

    def test_each_endpoint_is_paced_and_cancelled_when_the_client_leaves(self):
        for endpoint in ENDPOINTS:
            with self.subTest(endpoint=endpoint):
                self.assertTrue(wait_until(self.idle), "not idle at the start")
                payload = json.dumps(
                    body_for(endpoint, 64, stream=True, pace=4)).encode()
                sock = socket.create_connection(
                    ("127.0.0.1", self.daemon.http_port), timeout=60)
                reader = sock.makefile("rb")
                try:
                    sock.sendall(
                        f"POST {endpoint} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                        f"Authorization: Bearer {KEY}\r\n"
                        "Content-Type: application/json\r\n"
                        f"Content-Length: {len(payload)}\r\n\r\n".encode()
                        + payload)
                    self.assertTrue(
                        reader.readline().startswith(b"HTTP/1.1 200"))
                    # 64 tokens at 4 a second: the pacer holds the stream
                    # long after the engine finished.
                    self.assertTrue(wait_until(
                        lambda: self.metric("paceline_pacer_streams") == 1),
                        "the stream is not in the pacer")
                finally:
                    reader.close()
                    sock.close()
                self.assertTrue(wait_until(self.idle),
                                "the stream outlived its client")

    def test_each_endpoint_counts_requests_and_tokens(self):
        for endpoint in ENDPOINTS:
            with self.subTest(endpoint=endpoint):
                # Earlier requests' counts are final once nothing runs.
                self.assertTrue(wait_until(self.idle), "not idle")
                requests = self.metric_total("paceline_requests_total")
                tokens = self.metric_total("paceline_generation_tokens_total")
                status, _, answer = self.post(endpoint, body_for(endpoint, 4))
                self.assertEqual(status, 200, answer)
                self.assertTrue(wait_until(
                    lambda: self.metric_total("paceline_requests_total")
                    == requests + 1))
                self.assertGreater(
                    self.metric_total("paceline_generation_tokens_total"), tokens)

    def test_each_endpoint_applies_the_tenants_limits_in_its_shape(self):
        for endpoint in ENDPOINTS:
            with self.subTest(endpoint=endpoint):
                before = self.metric_total("paceline_rejections_total")
                status, _, answer = self.post(
                    endpoint, body_for(endpoint, 16), key=CAPPED_KEY)
                self.assertEqual(status, 400, answer)
                if endpoint == "/v1/messages":
                    self.assertEqual(answer["type"], "error", answer)
                    self.assertEqual(answer["error"]["type"],
                                     "invalid_request_error", answer)
                    message = answer["error"]["message"]
                else:
                    self.assertEqual(answer["error"]["type"],
                                     "invalid_request_error", answer)
                    message = answer["error"]["message"]
                self.assertIn("8", message)
                self.assertEqual(self.metric_total("paceline_rejections_total"),
                                 before + 1)
                # Within the limit it is served.
                status, _, answer = self.post(
                    endpoint, body_for(endpoint, 8), key=CAPPED_KEY)
                self.assertEqual(status, 200, answer)


class ParityDrainTest(DaemonTestCase):
    """SIGTERM with a paced stream open on each endpoint: every stream still
    ends whole, with its API's own last event, and the daemon exits 0."""

    EXTRA_ARGS = ("--chat-template-file", str(TEMPLATE))
    LAST = {"/v1/chat/completions": b"data: [DONE]",
            "/v1/responses": b"event: response.",  # completed / incomplete
            "/v1/messages": b"event: message_stop"}

    @classmethod
    def setUpClass(cls):
        if not TEMPLATE.is_file():
            raise unittest.SkipTest(f"no {TEMPLATE}")
        super().setUpClass()

    def test_streams_of_every_endpoint_end_whole_while_draining(self):
        streams = []
        for endpoint in ENDPOINTS:
            payload = json.dumps(
                body_for(endpoint, 12, stream=True, pace=8)).encode()
            sock = socket.create_connection(
                ("127.0.0.1", self.daemon.http_port), timeout=60)
            sock.sendall(f"POST {endpoint} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                         f"Authorization: Bearer {KEY}\r\n"
                         "Content-Type: application/json\r\n"
                         f"Content-Length: {len(payload)}\r\n\r\n".encode()
                         + payload)
            reader = sock.makefile("rb")
            self.assertTrue(reader.readline().startswith(b"HTTP/1.1 200"))
            streams.append((endpoint, sock, reader))
        self.daemon.sigterm()
        self.assertTrue(self.daemon.wait_for_stderr("draining", DEADLINE_S),
                        self.daemon.stderr_text())
        for endpoint, sock, reader in streams:
            with self.subTest(endpoint=endpoint):
                lines = []
                while True:
                    line = reader.readline()
                    if not line or line == b"0\r\n":
                        break
                    if line.startswith((b"data: ", b"event: ")):
                        lines.append(line.strip())
                reader.close()
                sock.close()
                self.assertTrue(lines, "no events")
                finals = [l for l in lines if l.startswith(
                    self.LAST[endpoint])]
                self.assertTrue(finals, lines[-5:])
                if endpoint == "/v1/responses":
                    self.assertIn(finals[-1], (b"event: response.completed",
                                               b"event: response.incomplete"),
                                  lines[-5:])
        self.assertEqual(self.daemon.wait(), 0, self.daemon.stderr_text())


if __name__ == "__main__":
    unittest.main(verbosity=2)
