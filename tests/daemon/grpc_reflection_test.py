#!/usr/bin/env python3
"""gRPC server reflection (v1 and v1alpha) and health by service name, on the
real pacelined over stories260K.

Reflection v1's messages are v1alpha's under another package (the same
fields and numbers), so one set of message classes, protoc's Python module
of proto/grpc/reflection/v1/reflection.proto, speaks to both services.

Environment (the ctest grpc_reflection_test sets all four):
  PACELINED                  the daemon binary
  PACELINE_PYTHON_STUBS      paceline.v1's stubs (paceline_client.py)
  PACELINE_GRPC_STD_PYTHON   reflection_pb2 and health_pb2
  PACELINE_SHARED_DIR        holds models/stories260K.gguf (skips without)
"""

import os
import pathlib
import sys
import unittest

from google.protobuf import descriptor_pb2

sys.path.insert(
    0, str(pathlib.Path(__file__).resolve().parents[2] / "tools" / "python"))
from paceline_client import PacelineClient, grpc, pb  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "testing"))
from pacelined_process import PacelinedProcess  # noqa: E402

sys.path.insert(0, os.environ.get("PACELINE_GRPC_STD_PYTHON", ""))
import health_pb2  # noqa: E402
import reflection_pb2  # noqa: E402

PACELINED = os.environ.get("PACELINED", "")
SHARED_DIR = pathlib.Path(os.environ.get("PACELINE_SHARED_DIR", "/nonexistent"))
MODEL = SHARED_DIR / "models" / "stories260K.gguf"
KEY = "alice-test-key"
PACELINE = "paceline.v1.Paceline"
NOT_FOUND = grpc.StatusCode.NOT_FOUND.value[0]
Request = reflection_pb2.ServerReflectionRequest
Serving = health_pb2.HealthCheckResponse


class DaemonTestCase(unittest.TestCase):

    def setUp(self):
        if not PACELINED or not os.access(PACELINED, os.X_OK):
            self.fail(f"PACELINED={PACELINED!r} is not an executable")
        if not MODEL.is_file():
            self.skipTest(f"no {MODEL}")
        self.daemon = PacelinedProcess(PACELINED, [
            "--model", str(MODEL), "--listen", "127.0.0.1:0",
            "--http-listen", "127.0.0.1:0", "--tenant", f"alice:{KEY}",
            "--allow-root"])
        self.addCleanup(self.daemon.kill)
        self.channel = grpc.insecure_channel(self.daemon.address)
        self.addCleanup(self.channel.close)

    def reflect(self, version, *requests):
        """The answers of one ServerReflectionInfo stream, in order."""
        call = self.channel.stream_stream(
            f"/grpc.reflection.{version}.ServerReflection/ServerReflectionInfo",
            request_serializer=Request.SerializeToString,
            response_deserializer=(
                reflection_pb2.ServerReflectionResponse.FromString))
        answers = list(call(iter(requests), timeout=30))
        self.assertEqual(len(answers), len(requests))
        for request, answer in zip(requests, answers):
            self.assertEqual(answer.original_request, request)
        return answers

    def services(self, version):
        answer, = self.reflect(version, Request(list_services="*"))
        self.assertEqual(answer.WhichOneof("message_response"),
                         "list_services_response", answer)
        return sorted(s.name for s in answer.list_services_response.service)

    def files(self, answer):
        """The FileDescriptorProtos of a file_descriptor_response."""
        self.assertEqual(answer.WhichOneof("message_response"),
                         "file_descriptor_response", answer)
        return [descriptor_pb2.FileDescriptorProto.FromString(b)
                for b in answer.file_descriptor_response.file_descriptor_proto]

    def health(self, service):
        check = self.channel.unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
            response_deserializer=Serving.FromString)
        return check(health_pb2.HealthCheckRequest(service=service),
                     timeout=30).status

    def stop(self):
        self.channel.close()
        self.assertEqual(self.daemon.terminate(), 0, self.daemon.stderr_text())


class ReflectionTest(DaemonTestCase):

    def test_v1_lists_what_v1alpha_lists(self):
        v1 = self.services("v1")
        self.assertEqual(v1, self.services("v1alpha"))
        for name in (PACELINE, "grpc.health.v1.Health",
                     "grpc.reflection.v1.ServerReflection",
                     "grpc.reflection.v1alpha.ServerReflection"):
            self.assertIn(name, v1)
        self.stop()

    def test_file_containing_the_service_declares_its_methods(self):
        answer, by_method = self.reflect(
            "v1", Request(file_containing_symbol=PACELINE),
            Request(file_containing_symbol=PACELINE + ".Generate"))
        files = self.files(answer)
        self.assertEqual(files[0].name, "paceline/v1/paceline.proto")
        self.assertEqual(files[0].package, "paceline.v1")
        service, = [s for s in files[0].service if s.name == "Paceline"]
        want = pb.DESCRIPTOR.services_by_name["Paceline"]
        self.assertEqual(sorted(m.name for m in service.method),
                         sorted(m.name for m in want.methods))
        generate, = [m for m in service.method if m.name == "Generate"]
        self.assertEqual(generate.input_type, ".paceline.v1.GenerateRequest")
        self.assertTrue(generate.server_streaming)
        # Every import comes along, so a client can build the pool.
        names = {f.name for f in files}
        self.assertEqual(len(names), len(files))
        for f in files:
            self.assertLessEqual(set(f.dependency), names, f.name)
        self.assertIn("google/protobuf/timestamp.proto", names)
        self.assertEqual(files, self.files(by_method))
        # The same files v1alpha answers with.
        alpha, = self.reflect("v1alpha",
                              Request(file_containing_symbol=PACELINE))
        self.assertEqual(names, {f.name for f in self.files(alpha)})
        self.stop()

    def test_file_by_filename(self):
        answer, = self.reflect(
            "v1", Request(file_by_filename="paceline/v1/paceline.proto"))
        self.assertEqual(self.files(answer)[0].name,
                         "paceline/v1/paceline.proto")
        self.stop()

    def test_extension_numbers_of_a_type(self):
        answer, = self.reflect("v1", Request(
            all_extension_numbers_of_type="paceline.v1.GenerateRequest"))
        numbers = answer.all_extension_numbers_response
        self.assertEqual(numbers.base_type_name, "paceline.v1.GenerateRequest")
        self.assertEqual(list(numbers.extension_number), [])
        self.stop()

    def test_unknown_names_are_not_found_and_the_stream_goes_on(self):
        ext = reflection_pb2.ExtensionRequest(
            containing_type="paceline.v1.GenerateRequest", extension_number=99)
        answers = self.reflect(
            "v1", Request(file_containing_symbol="paceline.v1.NoSuchThing"),
            Request(file_by_filename="no/such.proto"),
            Request(file_containing_extension=ext),
            Request(all_extension_numbers_of_type="no.such.Type"),
            Request(list_services=""))
        for answer in answers[:-1]:
            self.assertEqual(answer.WhichOneof("message_response"),
                             "error_response", answer)
            self.assertEqual(answer.error_response.error_code, NOT_FOUND)
            self.assertTrue(answer.error_response.error_message)
        self.assertIn(PACELINE, [
            s.name for s in answers[-1].list_services_response.service])
        alpha, = self.reflect(
            "v1alpha",
            Request(file_containing_symbol="paceline.v1.NoSuchThing"))
        self.assertEqual(alpha.error_response.error_code, NOT_FOUND)
        self.stop()


class HealthTest(DaemonTestCase):

    def test_serving_by_service_name(self):
        self.assertEqual(self.health(""), Serving.SERVING)
        self.assertEqual(self.health(PACELINE), Serving.SERVING)
        with self.assertRaises(grpc.RpcError) as unknown:
            self.health("no.such.Service")
        self.assertEqual(unknown.exception.code(), grpc.StatusCode.NOT_FOUND)
        self.stop()

    def test_not_serving_while_draining(self):
        client = PacelineClient(self.daemon.address, api_key=KEY, timeout=60)
        self.addCleanup(client.close)
        # 40 tokens at 10 tokens/s: 4 s of delivery to drain.
        events = client.generate("Once upon a time", max_tokens=40,
                                 temperature=0, pace=10, ignore_eos=True)
        self.assertTrue(next(events).HasField("accepted"))
        self.daemon.sigterm()
        self.assertTrue(self.daemon.wait_for_stderr("draining", 30),
                        self.daemon.stderr_text())
        self.assertEqual(self.health(""), Serving.NOT_SERVING)
        self.assertEqual(self.health(PACELINE), Serving.NOT_SERVING)
        finished = [e for e in events if e.HasField("finished")]
        self.assertEqual(finished[-1].finished.reason, pb.FINISH_REASON_LENGTH)
        self.assertEqual(self.daemon.wait(), 0, self.daemon.stderr_text())


if __name__ == "__main__":
    unittest.main(verbosity=2)
