#!/usr/bin/env python3
"""Checks deploy/docker/Dockerfile{,.cuda} without a Docker engine.

Every COPY source exists in the repository, and the build stage copies
every folder the top CMakeLists.txt adds; the runtime stage runs as a
numeric non-root user, exposes the gRPC and metrics ports its entrypoint
listens on, and has a `paceline health` HEALTHCHECK. For the Debian image,
`apt-cache show` finds every runtime package (skipped without apt-cache or
its package lists).

usage: docker_test.py REPO_ROOT
"""

import re
import shlex
import shutil
import subprocess
import sys

from deploy_common import Checker, repo_root


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuations joined, comments dropped."""
    out, pending = [], ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue  # a comment inside a continued instruction
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = pending + line
        pending = ""
        word, _, args = full.partition(" ")
        out.append((word.upper(), args.strip()))
    return out


def stages(instrs):
    """Splits at FROM: a list of (from_args, [(instr, args), ...])."""
    result = []
    for word, args in instrs:
        if word == "FROM":
            result.append((args, []))
        elif result:
            result[-1][1].append((word, args))
    return result


def apt_packages(run_args: str) -> list[str]:
    """The package names of `apt-get install ...` in a RUN line."""
    words = shlex.split(run_args.replace("&&", " && "))
    pkgs, on = [], False
    for w in words:
        if w == "install":
            on = True
        elif w in ("&&", ";", "|"):
            on = False
        elif on and not w.startswith("-"):
            pkgs.append(w)
    return pkgs


def copy_sources(args: str) -> list[str] | None:
    """COPY sources, or None for COPY --from=stage."""
    if args.startswith("["):
        import json
        words = json.loads(args)
    else:
        words = shlex.split(args)
    if any(w.startswith("--from") for w in words):
        return None
    words = [w for w in words if not w.startswith("--")]
    return words[:-1]


def subdirectories(cmake_text: str) -> set[str]:
    return set(re.findall(r"add_subdirectory\((\w+)\)", cmake_text))


def check_dockerfile(c: Checker, root, name: str, debian: bool) -> None:
    path = root / "deploy" / "docker" / name
    st = stages(instructions(path.read_text()))
    c.check(len(st) >= 2, f"{name}: multi-stage ({len(st)} stages)")
    build, runtime = st[0], st[-1]
    c.check(" AS " in build[0].upper(), f"{name}: build stage named ({build[0]})")
    if debian:
        c.check(build[0].split()[0] == "debian:12", f"{name}: build on debian:12")
        c.check(runtime[0] == "debian:12-slim", f"{name}: runtime on debian:12-slim")
    else:
        c.check(build[0].startswith("nvidia/cuda:"), f"{name}: build on nvidia/cuda")
        c.check(runtime[0].startswith("nvidia/cuda:"), f"{name}: runtime on nvidia/cuda")

    # COPY sources exist; the build stage has every top-level source folder.
    copied = set()
    for _, body in st:
        for word, args in body:
            if word not in ("COPY", "ADD"):
                continue
            sources = copy_sources(args)
            for src in sources or []:
                c.check((root / src).exists(), f"{name}: COPY {src} exists")
                copied.add(src.rstrip("/").split("/")[0])
    build_runs = " ".join(a for w, a in build[1] if w == "RUN")
    c.check("tools/setup.sh" in build_runs and "tools/build.sh" in build_runs,
            f"{name}: build stage runs tools/setup.sh and tools/build.sh")
    needed = subdirectories((root / "CMakeLists.txt").read_text()) | {"CMakeLists.txt"}
    missing = sorted(needed - copied)
    c.check(not missing, f"{name}: build stage copies every source folder {missing or ''}")

    rt = {}
    for word, args in runtime[1]:
        rt.setdefault(word, []).append(args)
    user = rt.get("USER", ["root"])[-1]
    uid = user.split(":")[0]
    c.check(uid.isdigit() and int(uid) != 0, f"{name}: runtime USER numeric, non-root ({user})")
    exposed = set(" ".join(rt.get("EXPOSE", [])).split())
    c.check({"50051", "9464"} <= exposed, f"{name}: EXPOSE 50051 9464 ({sorted(exposed)})")
    health = " ".join(rt.get("HEALTHCHECK", []))
    c.check("paceline" in health and "health" in health and "127.0.0.1:50051" in health,
            f"{name}: HEALTHCHECK runs paceline health --server 127.0.0.1:50051")
    entry = " ".join(rt.get("ENTRYPOINT", []))
    c.check('"pacelined"' in entry.split(",")[0], f"{name}: ENTRYPOINT is pacelined")
    for port in ("50051", "9464"):
        c.check(f":{port}" in entry, f"{name}: entrypoint listens on {port}")

    if not debian:
        return
    pkgs = [p for a in rt.get("RUN", []) if "apt-get" in a for p in apt_packages(a)]
    c.check(len(pkgs) > 0, f"{name}: runtime packages listed ({len(pkgs)})")
    for needed_pkg in ("libgrpc++1.51", "libprotobuf32", "libabsl20220623", "libssl3"):
        c.check(needed_pkg in pkgs, f"{name}: runtime installs {needed_pkg}")
    c.check(any(p.startswith("libprometheus-cpp-") for p in pkgs),
            f"{name}: runtime installs prometheus-cpp")
    if not shutil.which("apt-cache"):
        print("SKIP (package names): no apt-cache")
        return
    probe = subprocess.run(["apt-cache", "show", "libc6"], capture_output=True)
    if probe.returncode != 0:
        print("SKIP (package names): apt-cache has no package lists (apt-get update)")
        return
    # One call for all names (each call reads the whole cache); it succeeds
    # when some are missing, so look for each name's "Package:" stanza.
    r = subprocess.run(["apt-cache", "show", *pkgs], capture_output=True, text=True)
    found = set(re.findall(r"^Package: (\S+)$", r.stdout, re.M))
    for p in pkgs:
        c.check(p in found, f"{name}: apt-cache show {p}")


def main() -> int:
    root = repo_root()
    c = Checker()
    check_dockerfile(c, root, "Dockerfile", debian=True)
    check_dockerfile(c, root, "Dockerfile.cuda", debian=False)
    return c.finish()


if __name__ == "__main__":
    sys.exit(main())
