#!/usr/bin/env python3
"""A small Python client of pacelined, and a command line around it.

The module wraps the stubs generated from proto/paceline/v1/*.proto (the
build writes them to build/python; the `paceline_python_stubs` target).
Every call sends the tenant's API key as `authorization: Bearer KEY`.

    from paceline_client import PacelineClient

    with PacelineClient("127.0.0.1:50051", api_key="KEY") as client:
        # Streamed at 10 tokens/s: an Accepted event, Deltas, a Finished.
        for event in client.generate("Once upon a time", max_tokens=40,
                                     pace=10):
            if event.HasField("delta"):
                print(event.delta.text, end="", flush=True)
        # The whole text at once.
        print(client.complete("Once upon a time", max_tokens=40).text)

Failed calls raise grpc.RpcError (`.code()` is a grpc.StatusCode, e.g.
UNAUTHENTICATED; `.details()` the server's message).

The command line does what `paceline complete` does:

    python3 tools/python/paceline_client.py --server 127.0.0.1:50051 \\
        --api-key KEY --prompt "Once upon a time" --max-tokens 40 \\
        --pace 10 --stream

The stubs are looked up in $PACELINE_PYTHON_STUBS, else in build/python
next to this checkout. grpcio and protobuf come from Debian's
python3-grpcio and python3-protobuf (or pip).
"""

import argparse
import json
import os
import pathlib
import sys


def _import_stubs():
    stubs = os.environ.get("PACELINE_PYTHON_STUBS") or str(
        pathlib.Path(__file__).resolve().parents[2] / "build" / "python")
    if stubs not in sys.path:
        sys.path.insert(0, stubs)
    try:
        import grpc  # noqa: F401
    except ImportError:
        # A Python other than Debian's (pyenv, a venv) may still load
        # Debian's python3-grpcio when the versions match.
        system = "/usr/lib/python3/dist-packages"
        if os.path.isdir(system) and system not in sys.path:
            sys.path.append(system)
    try:
        import grpc
        from paceline.v1 import paceline_pb2, paceline_pb2_grpc
    except ImportError as e:
        sys.exit(f"paceline_client: {e}\n"
                 f"  needs grpcio and protobuf (Debian: python3-grpcio, "
                 f"python3-protobuf; try /usr/bin/python3) and the generated "
                 f"stubs in {stubs} (build the paceline_python_stubs target, "
                 f"or set PACELINE_PYTHON_STUBS)")
    return grpc, paceline_pb2, paceline_pb2_grpc


grpc, pb, pb_grpc = _import_stubs()

_PRIORITIES = {
    "interactive": pb.PRIORITY_INTERACTIVE,
    "standard": pb.PRIORITY_STANDARD,
    "batch": pb.PRIORITY_BATCH,
}

_REASONS = {
    pb.FINISH_REASON_EOS: "eos",
    pb.FINISH_REASON_STOP_SEQUENCE: "stop",
    pb.FINISH_REASON_LENGTH: "length",
    pb.FINISH_REASON_CANCELLED: "cancelled",
    pb.FINISH_REASON_ERROR: "error",
}


def make_chat(messages, tools=(), add_generation_prompt=None, **template_kwargs):
    """A Chat from OpenAI-style message dicts ({"role", "content", ...}).

    content may be text or a list of {"type": "text", "text": ...} parts;
    tool_calls' arguments and tools' parameters may be dicts (sent as JSON
    text). template_kwargs values are sent as JSON (enable_thinking=False).
    """
    chat = pb.Chat()
    for m in messages:
        msg = chat.messages.add(role=m["role"])
        content = m.get("content")
        if isinstance(content, str):
            msg.content = content
        elif content is not None:
            for part in content:
                msg.content_parts.add(type=part.get("type", "text"),
                                      text=part.get("text", ""))
        for key in ("name", "tool_call_id", "reasoning_content"):
            if m.get(key) is not None:
                setattr(msg, key, m[key])
        for call in m.get("tool_calls") or ():
            fn = call["function"]
            args = fn.get("arguments", "{}")
            msg.tool_calls.add(id=call.get("id", ""), type="function",
                               function=pb.FunctionCall(
                                   name=fn["name"],
                                   arguments=args if isinstance(args, str)
                                   else json.dumps(args)))
    for tool in tools:
        fn = tool["function"]
        params = fn.get("parameters", {})
        chat.tools.add(type="function", function=pb.FunctionTool(
            name=fn["name"], description=fn.get("description", ""),
            parameters=params if isinstance(params, str) else json.dumps(params)))
    if add_generation_prompt is not None:
        chat.add_generation_prompt = add_generation_prompt
    for name, value in template_kwargs.items():
        chat.template_kwargs[name] = json.dumps(value)
    return chat


def make_request(prompt, *, max_tokens=None, temperature=None, top_k=None,
                 top_p=None, seed=None, pace=None, burst=None, priority=None,
                 stop=(), ignore_eos=None, model="", tools=(),
                 template_kwargs=None):
    """A GenerateRequest; options left as None take the server's defaults.

    prompt is text, or a Chat (make_chat), or a list of message dicts
    rendered by the model's chat template (with tools and template_kwargs,
    e.g. {"enable_thinking": False}).

    pace is in tokens per second (0: as fast as generated); priority is
    "interactive", "standard" or "batch"; ignore_eos=True generates
    max_tokens even past the end-of-sequence token.
    """
    if isinstance(prompt, str):
        req = pb.GenerateRequest(model=model, text=prompt)
    elif isinstance(prompt, pb.Chat):
        req = pb.GenerateRequest(model=model, chat=prompt)
    else:
        req = pb.GenerateRequest(model=model, chat=make_chat(
            prompt, tools=tools, **(template_kwargs or {})))
    if max_tokens is not None:
        req.stopping.max_tokens = max_tokens
    if stop:
        req.stopping.stop.extend(stop)
    if ignore_eos is not None:
        req.stopping.ignore_eos = ignore_eos
    if temperature is not None:
        req.sampling.temperature = temperature
    if top_k is not None:
        req.sampling.top_k = top_k
    if top_p is not None:
        req.sampling.top_p = top_p
    if seed is not None:
        req.sampling.seed = seed
    if pace is not None:
        req.delivery.pace_tokens_per_s = pace
    if burst is not None:
        req.delivery.burst_tokens = burst
    if priority is not None:
        req.priority = _PRIORITIES[priority]
    return req


class PacelineClient:
    """One channel to pacelined, authenticated as one tenant.

    server: "host:port". api_key: the tenant's key (default
    $PACELINE_API_KEY). tls_ca: a PEM file of trusted certificates; None
    for an insecure channel. timeout: seconds per call (None: no deadline).
    """

    def __init__(self, server, api_key=None, tls_ca=None, timeout=None):
        api_key = api_key or os.environ.get("PACELINE_API_KEY")
        if not api_key:
            raise ValueError("an API key is required (or PACELINE_API_KEY)")
        self._metadata = (("authorization", f"Bearer {api_key}"),)
        self._timeout = timeout
        if tls_ca is None:
            self._channel = grpc.insecure_channel(server)
        else:
            with open(tls_ca, "rb") as f:
                creds = grpc.ssl_channel_credentials(root_certificates=f.read())
            self._channel = grpc.secure_channel(server, creds)
        self._stub = pb_grpc.PacelineStub(self._channel)

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _call(self, method, request):
        return method(request, metadata=self._metadata, timeout=self._timeout)

    def generate(self, prompt, **options):
        """Streams GenerateResponse events (accepted, delta..., finished).

        Options are make_request's. Leaving the loop early cancels the call
        (and the request on the server) when the iterator is closed or
        garbage-collected.
        """
        return self._call(self._stub.Generate, make_request(prompt, **options))

    def complete(self, prompt, **options):
        """The whole CompleteResponse (text, token_ids, finished) at once."""
        return self._call(self._stub.Complete, make_request(prompt, **options))

    def cancel(self, request_id):
        self._call(self._stub.Cancel, pb.CancelRequest(request_id=request_id))

    def tokenize(self, text, add_special_tokens=True):
        return self._call(self._stub.Tokenize, pb.TokenizeRequest(
            text=text, add_special_tokens=add_special_tokens))

    def list_models(self):
        return self._call(self._stub.ListModels, pb.ListModelsRequest()).models

    def server_status(self):
        return self._call(self._stub.GetServerStatus,
                          pb.GetServerStatusRequest())


def _since_queued(timings, field):
    if not timings.HasField("queued") or not timings.HasField(field):
        return None
    a, b = timings.queued, getattr(timings, field)
    return (b.seconds - a.seconds) + (b.nanos - a.nanos) * 1e-9


def finish_line(finished):
    """The summary `paceline complete` prints on stderr, for a Finished."""
    reason = _REASONS.get(finished.reason, "unspecified")
    if finished.reason == pb.FINISH_REASON_STOP_SEQUENCE:
        if finished.stop_sequence:
            reason += " " + repr(finished.stop_sequence)
        elif finished.HasField("stop_token_id"):
            reason += f" (token {finished.stop_token_id})"
    u, t = finished.usage, finished.timings

    def seconds(field):
        s = _since_queued(t, field)
        return "-" if s is None else f"{s:.2f} s"

    return (f"finish: {reason}; prompt {u.prompt_tokens} tokens "
            f"({u.cached_prompt_tokens} cached), generated "
            f"{u.completion_tokens} tokens; generation "
            f"{seconds('generation_done')}, delivery "
            f"{seconds('last_delivered')}")


def main(argv=None):
    p = argparse.ArgumentParser(
        description="Ask a running pacelined for a continuation of a prompt.")
    p.add_argument("--server", required=True, help="host:port of pacelined")
    p.add_argument("--api-key", help="the tenant's key "
                   "(default: $PACELINE_API_KEY)")
    p.add_argument("--prompt", required=True)
    p.add_argument("--max-tokens", type=int)
    p.add_argument("--temperature", type=float, help="0 = greedy")
    p.add_argument("--top-k", type=int)
    p.add_argument("--top-p", type=float)
    p.add_argument("--seed", type=int)
    p.add_argument("--pace", type=float, help="delivery pace, tokens/s")
    p.add_argument("--burst", type=int)
    p.add_argument("--priority", choices=sorted(_PRIORITIES))
    p.add_argument("--stop", action="append", default=[],
                   help="text that ends the generation (repeatable)")
    p.add_argument("--stream", action="store_true",
                   help="print deltas as they are delivered (Generate)")
    p.add_argument("--timeout", type=float, help="deadline in seconds")
    p.add_argument("--tls-ca", help="PEM file of trusted certificates")
    args = p.parse_args(argv)
    if not (args.api_key or os.environ.get("PACELINE_API_KEY")):
        p.error("--api-key (or PACELINE_API_KEY) is required")

    options = dict(max_tokens=args.max_tokens, temperature=args.temperature,
                   top_k=args.top_k, top_p=args.top_p, seed=args.seed,
                   pace=args.pace, burst=args.burst, priority=args.priority,
                   stop=args.stop)
    try:
        with PacelineClient(args.server, args.api_key, args.tls_ca,
                            args.timeout) as client:
            if args.stream:
                finished, wrote = None, False
                try:
                    for event in client.generate(args.prompt, **options):
                        if event.HasField("delta"):
                            sys.stdout.write(event.delta.text)
                            sys.stdout.flush()
                            wrote = True
                        elif event.HasField("finished"):
                            finished = event.finished
                finally:
                    if wrote or finished is not None:
                        print(flush=True)
                if finished is None:
                    raise RuntimeError("the stream ended without Finished")
            else:
                response = client.complete(args.prompt, **options)
                print(response.text, flush=True)
                finished = response.finished
    except grpc.RpcError as e:
        print(f"paceline_client: error: {e.code().name}: {e.details()}",
              file=sys.stderr)
        return 1
    except (OSError, RuntimeError) as e:
        print(f"paceline_client: error: {e}", file=sys.stderr)
        return 1
    print(finish_line(finished), file=sys.stderr)
    if finished.reason in (pb.FINISH_REASON_ERROR,
                           pb.FINISH_REASON_CANCELLED):
        print(f"paceline_client: error: generation "
              f"{_REASONS[finished.reason]}: {finished.message}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
