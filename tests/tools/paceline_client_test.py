"""tools/python/paceline_client.py against a scripted in-process Paceline
service: the request it builds, its output, and its errors."""

import contextlib
import io
import os
import pathlib
import sys
import unittest
from concurrent import futures

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "tools"
                       / "python"))
import paceline_client  # noqa: E402  (finds the stubs itself)

grpc, pb, pb_grpc = paceline_client.grpc, paceline_client.pb, \
    paceline_client.pb_grpc

KEY = "secret-key"
DELTAS = ["Once", " upon", " a time"]


def scripted_finish():
    f = pb.Finished(reason=pb.FINISH_REASON_LENGTH)
    f.usage.prompt_tokens, f.usage.cached_prompt_tokens = 5, 2
    f.usage.completion_tokens = 3
    f.timings.queued.seconds = 100
    f.timings.generation_done.seconds = 100
    f.timings.generation_done.nanos = 250_000_000
    f.timings.last_delivered.seconds = 102
    return f


class FakePaceline(pb_grpc.PacelineServicer):
    def __init__(self):
        self.last_request = None

    def _admit(self, request, context):
        self.last_request = request
        if dict(context.invocation_metadata()).get(
                "authorization") != f"Bearer {KEY}":
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "unknown API key")

    def Generate(self, request, context):
        self._admit(request, context)
        yield pb.GenerateResponse(accepted=pb.Accepted(request_id=7))
        for text in DELTAS:
            yield pb.GenerateResponse(delta=pb.Delta(text=text))
        yield pb.GenerateResponse(finished=scripted_finish())

    def Complete(self, request, context):
        self._admit(request, context)
        finished = scripted_finish()
        finished.timings.ClearField("last_delivered")
        return pb.CompleteResponse(text="".join(DELTAS), finished=finished)


class PacelineClientTest(unittest.TestCase):
    def setUp(self):
        self.service = FakePaceline()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        pb_grpc.add_PacelineServicer_to_server(self.service, self.server)
        port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()
        self.address = f"127.0.0.1:{port}"

    def tearDown(self):
        self.server.stop(None)

    def run_main(self, *args):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = paceline_client.main(
                ["--server", self.address, "--timeout", "30", *args])
        return code, out.getvalue(), err.getvalue()

    def test_complete_prints_text_and_finish_line(self):
        code, out, err = self.run_main("--api-key", KEY, "--prompt", "Once")
        self.assertEqual(code, 0, err)
        self.assertEqual(out, "Once upon a time\n")
        self.assertEqual(err, "finish: length; prompt 5 tokens (2 cached), "
                         "generated 3 tokens; generation 0.25 s, "
                         "delivery -\n")

    def test_stream_prints_deltas(self):
        code, out, err = self.run_main("--api-key", KEY, "--prompt", "Once",
                                       "--stream")
        self.assertEqual(code, 0, err)
        self.assertEqual(out, "Once upon a time\n")
        self.assertTrue(err.endswith("delivery 2.00 s\n"), err)

    def test_flags_fill_the_request(self):
        code, _, err = self.run_main(
            "--api-key", KEY, "--prompt", "Hello", "--max-tokens", "40",
            "--temperature", "0.5", "--pace", "12.5", "--burst", "4",
            "--priority", "batch", "--stop", "END", "--seed", "9")
        self.assertEqual(code, 0, err)
        req = self.service.last_request
        self.assertEqual(req.text, "Hello")
        self.assertEqual(req.stopping.max_tokens, 40)
        self.assertEqual(list(req.stopping.stop), ["END"])
        self.assertAlmostEqual(req.sampling.temperature, 0.5)
        self.assertEqual(req.sampling.seed, 9)
        self.assertFalse(req.sampling.HasField("top_k"))
        self.assertEqual(req.delivery.pace_tokens_per_s, 12.5)
        self.assertEqual(req.delivery.burst_tokens, 4)
        self.assertEqual(req.priority, pb.PRIORITY_BATCH)

    def test_wrong_key_is_unauthenticated(self):
        for extra in ([], ["--stream"]):
            code, out, err = self.run_main("--api-key", "wrong", "--prompt",
                                           "hi", *extra)
            self.assertEqual(code, 1)
            self.assertEqual(out, "")
            self.assertEqual(err, "paceline_client: error: UNAUTHENTICATED: "
                             "unknown API key\n")

    def test_make_request_sets_only_what_it_is_given(self):
        req = paceline_client.make_request("Hi", max_tokens=40,
                                           ignore_eos=True)
        self.assertEqual(req.stopping.max_tokens, 40)
        self.assertTrue(req.stopping.ignore_eos)
        self.assertFalse(req.HasField("sampling"))
        self.assertFalse(req.HasField("delivery"))
        self.assertFalse(paceline_client.make_request("Hi").HasField("stopping"))

    def test_module_api(self):
        with paceline_client.PacelineClient(self.address, KEY,
                                            timeout=30) as client:
            events = list(client.generate("Once", max_tokens=3, pace=0))
            self.assertEqual(events[0].accepted.request_id, 7)
            self.assertEqual([e.delta.text for e in events[1:-1]], DELTAS)
            self.assertEqual(events[-1].finished.reason,
                             pb.FINISH_REASON_LENGTH)
            self.assertEqual(client.complete("Once").text, "Once upon a time")


if __name__ == "__main__":
    unittest.main()
