"""Helpers shared by the deploy/ checks."""

import pathlib
import sys

SKIP = 77  # ctest's SKIP_RETURN_CODE for these tests


def repo_root() -> pathlib.Path:
    """The repository root: argv[1], else two levels above this file."""
    if len(sys.argv) > 1:
        return pathlib.Path(sys.argv[1]).resolve()
    return pathlib.Path(__file__).resolve().parents[2]


def metric_names(root: pathlib.Path) -> set[str]:
    """The metric families pacelined exports (histograms by base name).

    Read from deploy/metrics_names.txt for now; the one place to change to
    take them from a scrape of the real daemon instead.
    """
    names = set()
    for line in (root / "deploy" / "metrics_names.txt").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            names.add(line)
    return names


def base_metric_name(name: str) -> str:
    """paceline_x_seconds_bucket -> paceline_x_seconds (and _sum, _count)."""
    for suffix in ("_bucket", "_sum", "_count"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


class Checker:
    """Collects failures so one run reports all of them."""

    def __init__(self) -> None:
        self.failures: list[str] = []

    def check(self, ok: bool, what: str) -> bool:
        print(("ok: " if ok else "FAIL: ") + what)
        if not ok:
            self.failures.append(what)
        return ok

    def finish(self) -> int:
        if self.failures:
            print(f"{len(self.failures)} failure(s)")
            return 1
        return 0
