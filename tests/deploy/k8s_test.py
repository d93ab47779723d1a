#!/usr/bin/env python3
"""Checks deploy/k8s/ without a cluster or kubectl.

Every YAML parses; the kustomizations name files that exist and the kinds a
deployment needs; the Deployment's probes use the container's gRPC port;
terminationGracePeriodSeconds covers the ConfigMap config's
drain_timeout_seconds plus the preStop sleep; the pod runs non-root with a
read-only root; the Service, PodMonitor and scrape annotations point at the
container's ports; the GPU overlay asks for nvidia.com/gpu. The ConfigMap's
config is also parsed against proto/paceline/v1/config.proto with protoc
(skipped without protoc). Exits 77 without PyYAML.

usage: k8s_test.py REPO_ROOT
"""

import re
import shutil
import subprocess
import sys

from deploy_common import SKIP, Checker, repo_root

try:
    import yaml
except ImportError:
    print("SKIP: no PyYAML (Debian package python3-yaml)")
    sys.exit(SKIP)

DEFAULT_DRAIN_TIMEOUT_S = 30  # config.proto's default


def load_dir(c: Checker, k8s):
    """{relative path: [documents]} for every YAML under deploy/k8s."""
    docs = {}
    for path in sorted(k8s.rglob("*.yaml")):
        rel = str(path.relative_to(k8s))
        try:
            docs[rel] = [d for d in yaml.safe_load_all(path.read_text()) if d]
            c.check(True, f"{rel} parses")
        except yaml.YAMLError as e:
            c.check(False, f"{rel} parses: {e}")
    return docs


def by_kind(docs, files):
    out = {}
    for f in files:
        for d in docs.get(f, []):
            out.setdefault(d.get("kind"), []).append(d)
    return out


def textproto_field(text: str, name: str):
    """The value of a top-level scalar field of a text proto, or None."""
    m = re.search(rf"^\s*{name}\s*:\s*\"?([^\"\s#]+)\"?", text, re.M)
    return m.group(1) if m else None


def check_config(c: Checker, root, text: str) -> None:
    protoc = shutil.which("protoc")
    if not protoc:
        print("SKIP (config schema): no protoc")
        return
    r = subprocess.run(
        [protoc, "--encode=paceline.v1.ServerConfig", "-I", str(root / "proto"),
         str(root / "proto/paceline/v1/config.proto")],
        input=text.encode(), capture_output=True)
    c.check(r.returncode == 0,
            "ConfigMap config parses as paceline.v1.ServerConfig "
            + r.stderr.decode().strip())


def check_base(c: Checker, root, docs) -> None:
    kust = docs["kustomization.yaml"][0]
    resources = kust.get("resources", [])
    for r in resources:
        c.check(r in docs, f"kustomization resource {r} exists")
    kinds = by_kind(docs, resources)
    for kind in ("ConfigMap", "Deployment", "Service", "PodMonitor",
                 "PersistentVolumeClaim"):
        c.check(kind in kinds, f"kustomization has a {kind}")
    c.check("Secret" in by_kind(docs, ["tls-secret.example.yaml"]),
            "tls-secret.example.yaml is a Secret")

    dep = kinds["Deployment"][0]
    pod = dep["spec"]["template"]
    spec = pod["spec"]
    labels = pod["metadata"]["labels"]
    c.check(dep["spec"]["selector"]["matchLabels"].items() <= labels.items(),
            "Deployment selector matches its pod labels")
    container = spec["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    c.check({"grpc", "metrics"} <= ports.keys(), f"container ports grpc, metrics ({ports})")
    grpc_port, metrics_port = ports.get("grpc"), ports.get("metrics")

    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        p = container.get(probe, {})
        c.check(p.get("grpc", {}).get("port") == grpc_port,
                f"{probe} is a gRPC probe on the grpc port {grpc_port}")

    # The config: ports and drain timeout.
    cm = kinds["ConfigMap"][0]
    text = cm["data"]["pacelined.textproto"]
    check_config(c, root, text)
    listen = textproto_field(text, "listen")
    metrics_listen = textproto_field(text, "metrics_listen")
    c.check(listen is not None and listen.endswith(f":{grpc_port}"),
            f"config listen {listen} is on the grpc port")
    c.check(metrics_listen is not None and metrics_listen.endswith(f":{metrics_port}"),
            f"config metrics_listen {metrics_listen} is on the metrics port")
    drain = int(textproto_field(text, "drain_timeout_seconds") or DEFAULT_DRAIN_TIMEOUT_S)
    pre_stop = container.get("lifecycle", {}).get("preStop", {})
    sleep_s = 0
    cmd = pre_stop.get("exec", {}).get("command", [])
    if cmd[:1] == ["sleep"]:
        sleep_s = int(cmd[1])
    sleep_s += int(pre_stop.get("sleep", {}).get("seconds", 0))
    grace = spec.get("terminationGracePeriodSeconds", 30)
    c.check(grace >= drain + sleep_s + 5,
            f"terminationGracePeriodSeconds {grace} >= preStop {sleep_s} + drain "
            f"{drain} + 5 s margin")

    # Mounts: the ConfigMap at /etc/paceline, where the entrypoint looks.
    volumes = {v["name"]: v for v in spec["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    cfg_vol = volumes.get(mounts.get("/etc/paceline"), {})
    c.check(cfg_vol.get("configMap", {}).get("name") == cm["metadata"]["name"],
            "the ConfigMap is mounted at /etc/paceline")
    c.check("/models" in mounts, "models are mounted at /models")
    secret_vols = [v["secret"] for v in volumes.values() if "secret" in v]
    c.check(all(s.get("optional") for s in secret_vols),
            "Secret volumes are optional (the pod starts without TLS)")

    # Security.
    psc, csc = spec.get("securityContext", {}), container.get("securityContext", {})
    c.check(psc.get("runAsNonRoot") is True, "runAsNonRoot")
    c.check(int(psc.get("runAsUser", 0)) != 0, "runAsUser is not 0")
    c.check(csc.get("readOnlyRootFilesystem") is True, "readOnlyRootFilesystem")
    c.check(csc.get("allowPrivilegeEscalation") is False, "allowPrivilegeEscalation: false")
    c.check(csc.get("capabilities", {}).get("drop") == ["ALL"], "capabilities drop ALL")
    c.check("memory" in container.get("resources", {}).get("limits", {}),
            "a memory limit")

    # Service, PodMonitor, annotations.
    svc = kinds["Service"][0]
    c.check(svc["spec"]["selector"].items() <= labels.items(),
            "Service selector matches the pod labels")
    for p in svc["spec"]["ports"]:
        target = p.get("targetPort", p["port"])
        c.check(target in ports or target in ports.values(),
                f"Service port {p['name']} targets a container port ({target})")
    pm = kinds["PodMonitor"][0]
    c.check(pm["apiVersion"] == "monitoring.coreos.com/v1", "PodMonitor apiVersion")
    c.check(pm["spec"]["selector"]["matchLabels"].items() <= labels.items(),
            "PodMonitor selector matches the pod labels")
    for ep in pm["spec"]["podMetricsEndpoints"]:
        c.check(ep.get("port") == "metrics", "PodMonitor scrapes the metrics port")
    ann = pod["metadata"].get("annotations", {})
    c.check(ann.get("prometheus.io/scrape") == "true"
            and ann.get("prometheus.io/port") == str(metrics_port),
            "prometheus.io scrape annotations on the metrics port")


def check_gpu(c: Checker, docs) -> None:
    kust = docs.get("gpu/kustomization.yaml", [{}])[0]
    c.check(".." in kust.get("resources", []), "gpu overlay builds on the base")
    for p in kust.get("patches", []):
        c.check(f"gpu/{p['path']}" in docs, f"gpu patch {p['path']} exists")
    patch = docs["gpu/deployment-gpu.yaml"][0]
    container = patch["spec"]["template"]["spec"]["containers"][0]
    limits = container["resources"]["limits"]
    c.check(int(limits.get("nvidia.com/gpu", 0)) >= 1, "gpu overlay limits nvidia.com/gpu")
    c.check(any(i.get("newTag") == "cuda" for i in kust.get("images", [])),
            "gpu overlay uses the cuda image")


def main() -> int:
    root = repo_root()
    c = Checker()
    docs = load_dir(c, root / "deploy" / "k8s")
    if not c.failures:
        check_base(c, root, docs)
        check_gpu(c, docs)
    return c.finish()


if __name__ == "__main__":
    sys.exit(main())
