#!/usr/bin/python3
"""Writes tests/engine/cpu/data/embedding_reference.json: llama.cpp's pooled,
L2-normalized embeddings of the oracle qwen3 F32 file (../shared/oracle) for
the first two oracle prompts, with pooling `last` and `mean`.

Runs llama.cpp's server (--embeddings --pooling P, default --embd-normalize 2)
and posts the prompts' token ids to its OpenAI-compatible /v1/embeddings.

  make_embedding_reference.py LLAMA_SERVER [OUT.json]
"""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SHARED = os.path.join(os.path.dirname(ROOT), "shared", "oracle")
MODEL = os.path.join(SHARED, "models", "qwen3-base-f32.gguf")
OUT = os.path.join(ROOT, "tests", "engine", "cpu", "data",
                   "embedding_reference.json")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(port, body):
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/embeddings",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.load(r)


def embed(server, pooling, prompts):
    port = free_port()
    proc = subprocess.Popen(
        [server, "-m", MODEL, "--embeddings", "--pooling", pooling,
         "--port", str(port), "-c", "512", "-b", "512", "-ub", "512",
         "-t", "2", "-fa", "off"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            try:
                with urllib.request.urlopen(
                        f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.2)
        out = post(port, {"input": prompts, "model": "m"})
        return [d["embedding"] for d in sorted(out["data"],
                                               key=lambda d: d["index"])]
    finally:
        proc.terminate()
        proc.wait()


def main():
    server = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) > 2 else OUT
    with open(os.path.join(SHARED, "prompts.txt")) as f:
        prompts = [[int(t) for t in line.split()] for line in f
                   if line.strip()][:2]
    ref = {"model": "oracle/models/qwen3-base-f32.gguf", "prompts": prompts}
    for pooling in ("last", "mean"):
        ref[pooling] = [[round(v, 7) for v in e]
                        for e in embed(server, pooling, prompts)]
    with open(out, "w") as f:
        json.dump(ref, f)
        f.write("\n")


if __name__ == "__main__":
    main()
