#!/usr/bin/env python3
"""The Grafana dashboard and the alert rules use only metrics pacelined has.

Parses deploy/grafana/paceline-dashboard.json: a datasource variable, the
`model` and `tenant` variables, unique panel ids, and in every query every
paceline_* name (less _bucket/_sum/_count) in deploy_common.metric_names()
and every label it groups or matches by among the labels pacelined sets.
The same for the paceline_* names in deploy/prometheus/alerts.yml (which
also use `up` and kube-state-metrics; those are not checked).

usage: metric_names_test.py REPO_ROOT
"""

import json
import re
import sys

from deploy_common import Checker, base_metric_name, metric_names, repo_root

METRIC = re.compile(r"\bpaceline_[a-z0-9_]+")
# Labels pacelined sets, plus Prometheus' own (job, instance, le).
LABELS = {"model", "tenant", "finish_reason", "reason", "state", "version",
          "commit", "block_size", "num_blocks", "le", "job", "instance"}
BY = re.compile(r"\b(?:by|without|ignoring|on)\s*\(([^)]*)\)")
MATCHER = re.compile(r"[{,]\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)")


def check_expr(c: Checker, names, where: str, expr: str, labels=True) -> None:
    used = {base_metric_name(m) for m in METRIC.findall(expr)}
    unknown = sorted(used - names)
    c.check(not unknown, f"{where}: metrics known {unknown or sorted(used)}")
    if not labels:
        return
    found = set()
    for group in BY.findall(expr):
        found |= {l.strip() for l in group.split(",") if l.strip()}
    found |= set(MATCHER.findall(expr))
    bad = sorted(found - LABELS)
    c.check(not bad, f"{where}: labels known {bad or ''}")


def panels(dash):
    for p in dash.get("panels", []):
        yield p
        yield from p.get("panels", [])  # collapsed rows


def check_dashboard(c: Checker, root, names) -> None:
    path = root / "deploy/grafana/paceline-dashboard.json"
    dash = json.loads(path.read_text())
    c.check(dash.get("schemaVersion", 0) >= 36, f"schemaVersion {dash.get('schemaVersion')}")
    variables = {v["name"]: v for v in dash.get("templating", {}).get("list", [])}
    c.check(variables.get("datasource", {}).get("type") == "datasource"
            or "DS_PROMETHEUS" in json.dumps(dash.get("__inputs", [])),
            "a Prometheus datasource variable")
    for v in ("model", "tenant"):
        c.check(v in variables, f"template variable {v}")
        query = variables.get(v, {}).get("query", "")
        if isinstance(query, dict):
            query = query.get("query", "")
        check_expr(c, names, f"variable {v}", query)
    ids = [p["id"] for p in panels(dash)]
    c.check(len(ids) == len(set(ids)), "panel ids unique")
    queries = 0
    for p in panels(dash):
        if p.get("type") == "row":
            continue
        targets = p.get("targets", [])
        c.check(bool(targets), f"panel '{p['title']}' has queries")
        for t in targets:
            queries += 1
            check_expr(c, names, f"panel '{p['title']}' {t.get('refId')}", t.get("expr", ""))
            c.check(bool(METRIC.search(t.get("expr", ""))),
                    f"panel '{p['title']}' {t.get('refId')} queries a paceline metric")
    c.check(queries > 0, f"{queries} queries")


def check_alerts(c: Checker, root, names) -> None:
    text = (root / "deploy/prometheus/alerts.yml").read_text()
    exprs = re.findall(r"expr:\s*(\|?[^\n]*(?:\n {10,}[^\n]*)*)", text)
    c.check(bool(exprs), f"alerts.yml: {len(exprs)} expressions")
    for i, e in enumerate(exprs):
        check_expr(c, names, f"alerts.yml expr {i}", e, labels=False)


def main() -> int:
    root = repo_root()
    names = metric_names(root)
    c = Checker()
    c.check(len(names) > 0, f"{len(names)} metric names in deploy/metrics_names.txt")
    check_dashboard(c, root, names)
    check_alerts(c, root, names)
    return c.finish()


if __name__ == "__main__":
    sys.exit(main())
