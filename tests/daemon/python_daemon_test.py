#!/usr/bin/env python3
"""The real pacelined driven from Python, through tools/python's PacelineClient.

Each test starts its own daemon on a loopback port (port 0; the address is
read from its "pacelined: listening on HOST:PORT" line), talks to it with
PacelineClient, and ends by sending SIGTERM and checking the exit status is
0. tearDown kills whatever is still running.

Environment (the ctest python_daemon_test sets all three):
  PACELINED              the daemon binary
  PACELINE_PYTHON_STUBS  the generated stubs (paceline_client.py reads it)
  PACELINE_SHARED_DIR    holds models/stories260K.gguf and models/README.md;
                         the tests that need the model skip without it.
"""

import os
import pathlib
import sys
import time
import unittest

sys.path.insert(
    0, str(pathlib.Path(__file__).resolve().parents[2] / "tools" / "python"))
from paceline_client import PacelineClient, grpc, pb  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "testing"))
from pacelined_process import PacelinedProcess  # noqa: E402
import stories260k_oracle  # noqa: E402

PACELINED = os.environ.get("PACELINED", "")
SHARED_DIR = pathlib.Path(os.environ.get("PACELINE_SHARED_DIR", "/nonexistent"))
MODEL = SHARED_DIR / "models" / "stories260K.gguf"
README = SHARED_DIR / "models" / "README.md"

ALICE_KEY = "alice-test-key"
PROMPT = "Once upon a time"
PROMPT_IDS = [1, 403, 407, 261, 378]  # BOS + the SPM pieces, README.md


def greedy64_oracle():
    """(text, ids) of the stories260K 64-token oracle (tests/testing)."""
    return stories260k_oracle.greedy64_oracle(README)


def seconds_between(a, b):
    """b - a for two google.protobuf.Timestamps, in seconds."""
    return (b.seconds - a.seconds) + (b.nanos - a.nanos) * 1e-9


def Daemon(args, ready_timeout=60.0):
    """pacelined with `args` (tests/testing/pacelined_process.py)."""
    return PacelinedProcess(PACELINED, args, ready_timeout)


class DaemonTestCase(unittest.TestCase):
    """Starts pacelined with tenant alice; stop() ends it with SIGTERM."""

    MODEL_ARG = None  # None: stories260K, skipping when it is absent
    EXTRA_ARGS = ()   # more pacelined flags

    def setUp(self):
        if not PACELINED or not os.access(PACELINED, os.X_OK):
            self.fail(f"PACELINED={PACELINED!r} is not an executable")
        model = self.MODEL_ARG
        if model is None:
            if not MODEL.is_file():
                self.skipTest(f"no {MODEL}")
            model = str(MODEL)
        self.daemon = Daemon(["--model", model, "--listen", "127.0.0.1:0",
                              "--http-listen", "127.0.0.1:0",
                              "--tenant", f"alice:{ALICE_KEY}",
                              "--allow-root", *self.EXTRA_ARGS])
        self.addCleanup(self.daemon.kill)
        self.client = PacelineClient(self.daemon.address, api_key=ALICE_KEY,
                                     timeout=60)
        self.addCleanup(self.client.close)

    def stop(self):
        self.client.close()
        code = self.daemon.terminate()
        self.assertEqual(code, 0, self.daemon.stderr_text())

    def wait_status(self, done, timeout=2.0):
        """Polls GetServerStatus until done(status) or timeout; the last."""
        deadline = time.monotonic() + timeout
        status = self.client.server_status()
        while not done(status) and time.monotonic() < deadline:
            time.sleep(0.01)
            status = self.client.server_status()
        return status

    def wait_idle(self, timeout=2.0):
        return self.wait_status(
            lambda s: s.kv_cache.used_blocks == 0 and s.running_sequences == 0
            and s.waiting_requests == 0 and s.paced_streams == 0, timeout)


class Stories260KTest(DaemonTestCase):

    def test_streamed_and_unary_give_the_oracle_continuation(self):
        text, ids = greedy64_oracle()
        accepted, streamed, streamed_ids, finished = None, "", [], None
        for event in self.client.generate(PROMPT, max_tokens=64,
                                          temperature=0):
            kind = event.WhichOneof("event")
            if kind == "accepted":
                accepted = event.accepted
            elif kind == "delta":
                streamed += event.delta.text
                streamed_ids.extend(event.delta.token_ids)
            elif kind == "finished":
                finished = event.finished
        self.assertIsNotNone(accepted)
        self.assertEqual(accepted.prompt_tokens, len(PROMPT_IDS))
        self.assertIsNotNone(finished)
        self.assertEqual(finished.reason, pb.FINISH_REASON_LENGTH)
        self.assertEqual(finished.usage.completion_tokens, 64)
        self.assertEqual(streamed, text)
        self.assertEqual(streamed_ids, ids)

        unary = self.client.complete(PROMPT, max_tokens=64, temperature=0)
        self.assertEqual(unary.text, text)
        self.assertEqual(unary.text, streamed)
        self.assertEqual(list(unary.token_ids), streamed_ids)
        self.assertEqual(unary.finished.reason, pb.FINISH_REASON_LENGTH)
        self.stop()

    def test_paced_stream_is_delivered_at_its_pace(self):
        # 40 tokens at 20 tokens/s, one at once: token k is released no
        # sooner than k / 20 s after the request was queued, and generation
        # is done before delivery ends. Only the bounds pacing guarantees
        # are asserted (a loaded machine only stretches the rest).
        ids, finished = [], None
        for event in self.client.generate(PROMPT, max_tokens=40,
                                          temperature=0, pace=20,
                                          ignore_eos=True):
            if event.HasField("delta"):
                ids.extend(event.delta.token_ids)
            elif event.HasField("finished"):
                finished = event.finished
        self.assertEqual(len(ids), 40)
        self.assertIsNotNone(finished)
        t = finished.timings
        self.assertGreaterEqual(
            seconds_between(t.queued, t.last_delivered), 39 / 20)
        self.assertGreater(
            seconds_between(t.generation_done, t.last_delivered), 0)
        self.stop()

    def test_wrong_key_is_unauthenticated(self):
        with PacelineClient(self.daemon.address, api_key="not-a-key",
                            timeout=30) as wrong:
            with self.assertRaises(grpc.RpcError) as unary:
                wrong.complete(PROMPT, max_tokens=4)
            self.assertEqual(unary.exception.code(),
                             grpc.StatusCode.UNAUTHENTICATED)
            with self.assertRaises(grpc.RpcError) as streamed:
                list(wrong.generate(PROMPT, max_tokens=4))
            self.assertEqual(streamed.exception.code(),
                             grpc.StatusCode.UNAUTHENTICATED)
            with self.assertRaises(grpc.RpcError) as status:
                wrong.server_status()
            self.assertEqual(status.exception.code(),
                             grpc.StatusCode.UNAUTHENTICATED)
        self.stop()

    def test_every_rpc_needs_a_key(self):
        # Every method of the service, from its descriptor: a new RPC is
        # covered without editing this test. Each gets an empty request,
        # with no key and with a wrong one.
        service = pb.DESCRIPTOR.services_by_name["Paceline"]
        self.assertGreaterEqual(len(service.methods), 8)
        channel = grpc.insecure_channel(self.daemon.address)
        self.addCleanup(channel.close)
        for method in service.methods:
            path = f"/{service.full_name}/{method.name}"
            call = (channel.unary_stream if method.server_streaming
                    else channel.unary_unary)(
                        path, request_serializer=lambda b: b,
                        response_deserializer=lambda b: b)
            for metadata in ((), (("authorization", "Bearer not-a-key"),)):
                with self.subTest(method=method.name, metadata=metadata):
                    with self.assertRaises(grpc.RpcError) as error:
                        answer = call(b"", metadata=metadata, timeout=30)
                        if method.server_streaming:
                            list(answer)
                    self.assertEqual(error.exception.code(),
                                     grpc.StatusCode.UNAUTHENTICATED,
                                     error.exception.details())
        self.stop()

    def test_tokenize(self):
        self.assertEqual(list(self.client.tokenize(PROMPT).token_ids),
                         PROMPT_IDS)
        self.stop()

    def test_cancelled_paced_stream_frees_everything(self):
        # Cancelled while delivering (stories260K generates the 60 tokens
        # in milliseconds; delivery at 10 tokens/s takes 6 s).
        call = self.client.generate(PROMPT, max_tokens=60, temperature=0,
                                    pace=10)
        first = next(call)
        self.assertTrue(first.HasField("accepted"))
        self.assertTrue(next(call).HasField("delta"))
        self.assertEqual(self.wait_status(
            lambda s: s.paced_streams == 1).paced_streams, 1)
        call.cancel()
        with self.assertRaises(grpc.RpcError) as cancelled:
            for _ in call:
                pass
        self.assertEqual(cancelled.exception.code(),
                         grpc.StatusCode.CANCELLED)
        after = self.wait_idle()
        self.assertEqual(after.kv_cache.used_blocks, 0)
        self.assertEqual(after.paced_streams, 0)
        self.assertEqual(after.running_sequences, 0)
        self.stop()


class SlowModelTest(DaemonTestCase):
    """dummy:stories42m (no file needed) is slow enough on a CPU that a
    long request is still generating, holding KV, when it is cancelled."""

    MODEL_ARG = "dummy:stories42m"

    def test_cancelled_running_stream_returns_its_kv_blocks(self):
        self.assertEqual(self.wait_idle().kv_cache.used_blocks, 0)
        call = self.client.generate(PROMPT, max_tokens=900, temperature=0,
                                    pace=10, ignore_eos=True)
        self.assertTrue(next(call).HasField("accepted"))
        self.assertTrue(next(call).HasField("delta"))
        busy = self.wait_status(lambda s: s.running_sequences == 1
                                and s.kv_cache.used_blocks > 0)
        self.assertEqual(busy.running_sequences, 1)
        self.assertGreater(busy.kv_cache.used_blocks, 0)
        call.cancel()
        with self.assertRaises(grpc.RpcError) as cancelled:
            for _ in call:
                pass
        self.assertEqual(cancelled.exception.code(),
                         grpc.StatusCode.CANCELLED)
        after = self.wait_idle()
        self.assertEqual(after.kv_cache.used_blocks, 0)
        self.assertEqual(after.running_sequences, 0)
        self.assertEqual(after.paced_streams, 0)
        self.stop()


TEMPLATE = SHARED_DIR / "chat_templates" / "Qwen-Qwen2.5-7B-Instruct.jinja"


def reference_render(context):
    """jinja2's rendering (tests/testing/jinja2_reference.py) of TEMPLATE."""
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] /
                           "testing"))
    import jinja2_reference  # noqa: E402  (Debian's python3-jinja2)
    answer = jinja2_reference.answer(jinja2_reference.environment(), {
        "template": TEMPLATE.read_text(encoding="utf-8"), "context": context})
    if not answer["ok"]:
        raise AssertionError(answer["error"])
    return answer["text"]


class ChatTest(DaemonTestCase):
    """Chat through PacelineClient's make_chat, with Qwen 2.5's template."""

    EXTRA_ARGS = ("--chat-template-file", str(TEMPLATE))

    def setUp(self):
        if not TEMPLATE.is_file():
            self.skipTest(f"no {TEMPLATE}")
        super().setUp()

    def test_chat_answers_as_its_rendering_sent_as_text(self):
        # (No tools list: its system prompt is longer than stories260K's
        # 512-token context; the call round trip still renders.)
        messages = [
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": None, "tool_calls": [{
                "id": "call_1", "type": "function", "function": {
                    "name": "get_weather", "arguments": {"city": "Paris"}}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
            {"role": "user", "content": "Once upon a time"},
        ]
        rendered = reference_render({
            "messages": messages, "add_generation_prompt": True,
            "bos_token": "<s>", "eos_token": "</s>"})
        self.assertIn('"city": "Paris"', rendered)
        chat = self.client.complete(messages, max_tokens=24, temperature=0)
        text = self.client.complete(rendered, max_tokens=24, temperature=0)
        self.assertEqual(chat.accepted.prompt_tokens,
                         text.accepted.prompt_tokens)
        self.assertTrue(text.text)
        self.assertEqual(chat.text, text.text)
        self.assertEqual(list(chat.tool_calls), [])
        self.stop()


if __name__ == "__main__":
    unittest.main(verbosity=2)
