#!/usr/bin/env python3
"""Checks DESIGN.md §3's include arrows: each module's sources include only
the project headers of the modules it may use. Run by the build (target
check_includes), so a wrong include fails it; prints each violation as
FILE:LINE: MODULE may not include HEADER. Every folder with sources has a
rule (tests/ may include anything): a new folder without one fails too.

Usage: check_includes.py SOURCE_DIR
"""
import os
import re
import sys

# module folder -> project folders its files may include (besides itself).
# A folder's rule covers its files, not its subfolders (each has its own).
ALLOWED = {
    "common": [],
    "kvpager": ["common"],
    "engine/gguf": ["common"],
    # The architectures' descriptions (model/arch/, one file each) are part
    # of the model layer: layer_program.cc lists them.
    "engine/model": ["common", "engine/gguf", "engine/model/arch"],
    "engine/model/arch": ["common", "engine/gguf", "engine/model"],
    "engine/tokenizer": ["common", "engine/gguf", "engine/model"],
    "engine/sampling": ["common"],
    # The grammar engine: the chain's token-mask interface, the tokenizer's
    # token bytes (and its encoder, for forced continuations).
    "engine/sampling/grammar": ["common", "engine/sampling",
                                "engine/tokenizer", "engine/gguf",
                                "engine/model"],
    # The interface names the row rule's parameters (ForwardAndSample).
    "engine": ["common", "engine/model", "engine/gguf", "engine/sampling",
               "engine/tokenizer", "kvpager",
               # backend.cc, the composition of the backends:
               "engine/cpu", "engine/cuda"],
    "engine/cpu": ["common", "engine", "engine/model", "engine/gguf",
                   "engine/sampling", "engine/cpu/kernels"],
    "engine/cpu/kernels": ["common", "engine/cpu", "engine/model",
                           "engine/gguf"],
    "engine/cuda": ["common", "engine", "engine/model", "engine/gguf",
                    "engine/sampling", "engine/cuda/kernels"],
    "engine/cuda/kernels": ["common", "engine/cuda", "engine/model",
                            "engine/gguf", "engine/sampling"],
    "scheduler": ["common", "engine", "engine/model", "engine/gguf",
                  "engine/tokenizer", "engine/sampling", "kvpager"],
    # Chat: templates, prompts, output parsing, over the tokenizer.
    "chat": ["common", "engine/tokenizer", "chat/jinja", "chat/tool_formats"],
    # The tool-call families as data and their readers, under the parser.
    "chat/tool_formats": ["common", "engine/tokenizer", "chat"],
    # The template interpreter's internals, behind chat_template.h: only
    # the Unicode helpers.
    "chat/jinja": ["common", "engine/tokenizer"],
    "metrics": ["common"],
    # Delivery sees the sink's side of the scheduler, never gRPC or the
    # service (the reactors implement its StreamWriter).
    "server/delivery": ["common", "scheduler", "engine/sampling",
                        "engine/tokenizer", "chat"],
    # The transport-neutral core: keys, request building, submission.
    "server/frontend": ["common", "engine", "engine/model", "engine/gguf",
                        "engine/sampling", "engine/sampling/grammar", "engine/tokenizer", "kvpager",
                        "scheduler", "chat", "chat/tool_formats",
                        "server/delivery"],
    # The gRPC adapter over the core (and the wire conversions).
    "server/grpc": ["common", "engine", "engine/model", "engine/gguf",
                    "engine/sampling", "engine/tokenizer", "scheduler",
                    "chat", "server/frontend", "server/delivery"],
    # The HTTP server knows nothing of what it serves.
    "server/http": ["common"],
    # The OpenAI API: its pure part (bodies, responses) over delivery's
    # output, and the served part over the frontend core and the HTTP
    # server. Never the gRPC adapter.
    "server/openai": ["common", "server/frontend", "server/http",
                      "server/delivery",
                      "scheduler", "engine/tokenizer", "engine/sampling",
                      "chat", "chat/tool_formats"],
    # Anthropic's Messages API: the OpenAI adapter's shared core (its JSON
    # readers, the generation call, the route table), never the reverse.
    "server/anthropic": ["common", "server/frontend", "server/http",
                         "server/delivery",
                         "scheduler", "engine/tokenizer", "engine/sampling",
                         "chat", "server/openai"],
    # The composition root (the daemon) and its config.
    "server": ["common", "engine", "engine/model", "engine/gguf",
               "engine/sampling", "engine/sampling/grammar", "engine/tokenizer", "kvpager", "metrics",
               "scheduler", "chat", "server/delivery", "server/http",
               "server/frontend", "server/grpc", "server/openai",
               "server/anthropic"],
    # The CLI: the engine and scheduler in process, the server's request
    # building, gRPC and HTTP clients.
    "tools/paceline": ["common", "engine", "engine/model", "engine/gguf",
                       "engine/sampling", "engine/sampling/grammar",
                       "engine/tokenizer", "kvpager",
                       "scheduler", "chat", "server", "server/frontend",
                       "server/grpc"],
    # The TSan build's Abseil shim.
    "tools/sanitize": [],
    # Benchmarks and fuzz targets drive any module (and the test helpers)
    # but the HTTP clients and servers they need.
    "bench": ["common", "engine", "engine/model", "engine/gguf",
              "engine/sampling", "engine/tokenizer", "engine/cpu",
              "engine/cpu/kernels", "engine/cuda", "kvpager", "scheduler",
              "chat", "server/delivery", "tests/testing"],
    "fuzz": ["common", "engine/gguf", "engine/model", "engine/tokenizer",
             "engine/sampling", "engine/sampling/grammar", "chat", "server",
             "server/frontend", "server/http", "server/openai",
             "tests/testing"],
}
# Folders whose sources follow no rule: the tests (and their helpers) may
# include any module; generated and fetched code.
UNCHECKED = ("tests", "third_party", "node_modules", ".git", "fuzz/corpus")
# Only these files of engine/ (root) may include a backend.
BACKEND_COMPOSERS = {"engine/backend.h", "engine/backend.cc"}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SOURCE = (".h", ".cc", ".cu", ".cuh", ".inc")


def module_of(path):
    return os.path.dirname(path)


def header_module(header):
    return os.path.dirname(header)


def unruled_folders(root):
    """Folders holding sources that ALLOWED has no rule for."""
    missing = []
    for folder, subfolders, files in os.walk(root):
        rel = os.path.relpath(folder, root)
        subfolders[:] = sorted(
            d for d in subfolders
            if not d.startswith("build") and
            os.path.normpath(os.path.join(rel, d)) not in UNCHECKED)
        if rel != "." and rel not in ALLOWED and any(
                f.endswith(SOURCE) for f in files):
            missing.append(rel)
    return missing


def check(root):
    errors = [f"{folder}: no include rule (tools/check_includes.py)"
              for folder in unruled_folders(root)]
    for module, allowed in ALLOWED.items():
        folder = os.path.join(root, module)
        if not os.path.isdir(folder):
            continue
        for name in sorted(os.listdir(folder)):
            if not name.endswith(SOURCE):
                continue
            rel = f"{module}/{name}"
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                for n, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    header = m.group(1)
                    target = header_module(header)
                    if "/" not in header or target == module:
                        continue  # same folder, or a system-style name
                    if not os.path.exists(os.path.join(root, header)):
                        continue  # generated or external
                    ok = target in allowed
                    if (module == "engine" and target in
                            ("engine/cpu", "engine/cuda") and
                            rel not in BACKEND_COMPOSERS):
                        ok = False
                    if not ok:
                        errors.append(
                            f"{rel}:{n}: {module} may not include {header}")
    return errors


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    errors = check(root)
    for e in errors:
        print(e, file=sys.stderr)
    if errors:
        print(f"check_includes: {len(errors)} problem(s) against DESIGN.md §3",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
