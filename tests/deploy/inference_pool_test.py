#!/usr/bin/env python3
"""Checks deploy/k8s/inference-pool/ without a cluster or kubectl.

Every YAML there parses and is listed in its kustomization. The
InferencePool validates against the CRD's openAPIV3Schema (CRD_YAML, from
kubernetes-sigs/gateway-api-inference-extension) with jsonschema. The
schema's Kubernetes-specific `x-kubernetes-*` keys are dropped before
validating, since jsonschema does not know them; the two CEL rules they
carry (`x-kubernetes-validations`: an endpointPickerRef of kind Service
has a port; target port numbers are unique) are checked by hand instead.
Objects that declare `properties` get `additionalProperties: false`, as
kubectl's strict field validation refuses unknown fields. A few broken
copies of the pool must fail the same validation, so the validator is
shown to reject.

Cross-references: the pool's selector matches the pacelined Deployment's
pod labels; its target port is the container's `http` port and the
ConfigMap's `http { listen }` port; its endpointPickerRef names the EPP
Service and a port of it that reaches the EPP's ext_proc port; the
HTTPRoute's parent is the Gateway here and its backendRef is the pool; the
EPP's config (EndpointPickerConfig in its ConfigMap) names metrics that are
in deploy/metrics_names.txt and scrapes the container's `metrics` port; the
EPP runs under the namespace's restricted Pod Security; no Secret or API key
is in the folder. Exits 77 without PyYAML or jsonschema.

usage: inference_pool_test.py REPO_ROOT CRD_YAML
"""

import copy
import pathlib
import re
import sys

from deploy_common import SKIP, Checker, metric_names, repo_root

try:
    import jsonschema
    import yaml
except ImportError as e:
    print(f"SKIP: {e.name} missing (Debian packages python3-yaml, python3-jsonschema)")
    sys.exit(SKIP)

POOL_GROUP = "inference.networking.k8s.io"
EPP_CONFIG_API = "llm-d.ai/v1alpha1"
# The labels of paceline_cache_config_info (metrics/metrics.h).
CACHE_INFO_LABELS = {"block_size", "num_blocks"}


def load_yaml_dir(c: Checker, folder: pathlib.Path):
    """{file name: [documents]} for every YAML directly in `folder`."""
    docs = {}
    for path in sorted(folder.glob("*.yaml")):
        try:
            docs[path.name] = [d for d in yaml.safe_load_all(path.read_text()) if d]
            c.check(True, f"{path.name} parses")
        except yaml.YAMLError as e:
            c.check(False, f"{path.name} parses: {e}")
    return docs


def one(c: Checker, objects, kind: str):
    """The single object of `kind`, or None (a failure)."""
    found = [o for o in objects if o.get("kind") == kind]
    c.check(len(found) == 1, f"one {kind} ({len(found)})")
    return found[0] if len(found) == 1 else None


def strict_schema(node):
    """A copy of a CRD schema for jsonschema: x-kubernetes-* keys dropped,
    unknown fields refused where `properties` are declared."""
    if isinstance(node, list):
        return [strict_schema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: strict_schema(v) for k, v in node.items()
           if not k.startswith("x-kubernetes-")}
    if "properties" in node and "additionalProperties" not in node:
        out["additionalProperties"] = False
    return out


def pool_schema(c: Checker, crd_path: pathlib.Path):
    crd = yaml.safe_load(crd_path.read_text())
    versions = {v["name"]: v for v in crd["spec"]["versions"]}
    c.check(crd["spec"]["group"] == POOL_GROUP and "v1" in versions,
            f"CRD {crd_path.name} serves {POOL_GROUP}/v1")
    schema = strict_schema(versions["v1"]["schema"]["openAPIV3Schema"])
    cls = jsonschema.validators.validator_for(schema, jsonschema.Draft7Validator)
    cls.check_schema(schema)
    return cls(schema), crd["spec"]["names"]["kind"]


def cel_errors(pool) -> list[str]:
    """The CRD's x-kubernetes-validations rules, by hand."""
    errors = []
    ref = pool.get("spec", {}).get("endpointPickerRef")
    if ref is not None and ref.get("kind", "Service") == "Service" and "port" not in ref:
        errors.append("endpointPickerRef: port is required when kind is Service")
    numbers = [p.get("number") for p in pool.get("spec", {}).get("targetPorts", [])]
    if len(numbers) != len(set(numbers)):
        errors.append("targetPorts: port number must be unique")
    return errors


def pool_errors(validator, pool) -> list[str]:
    errors = [f"{'/'.join(map(str, e.path))}: {e.message}"
              for e in validator.iter_errors(pool)]
    return errors + cel_errors(pool)


def check_pool_schema(c: Checker, validator, kind: str, pool) -> None:
    c.check(pool["apiVersion"] == f"{POOL_GROUP}/v1" and pool["kind"] == kind,
            f"InferencePool apiVersion/kind {pool['apiVersion']} {pool['kind']}")
    errors = pool_errors(validator, pool)
    c.check(not errors, f"InferencePool validates against the CRD schema {errors}")
    # The validator refuses what the CRD refuses.
    broken = {
        "no selector": lambda s: s.pop("selector"),
        "port 70000": lambda s: s["targetPorts"].append({"number": 70000}),
        "unknown field": lambda s: s.update(targetPort=8000),
        "bad appProtocol": lambda s: s.update(appProtocol="grpc"),
        "duplicate port": lambda s: s["targetPorts"].append(dict(s["targetPorts"][0])),
        "picker without port": lambda s: s["endpointPickerRef"].pop("port"),
    }
    for what, mutate in broken.items():
        bad = copy.deepcopy(pool)
        mutate(bad["spec"])
        c.check(bool(pool_errors(validator, bad)), f"a pool with {what} is refused")


def kustomize_resources(c: Checker, folder: pathlib.Path, docs):
    """The overlay's own objects, and the base's (from `..`)."""
    kust = docs.get("kustomization.yaml", [{}])[0]
    resources = kust.get("resources", [])
    patches = [p["path"] for p in kust.get("patches", [])]
    c.check(".." in resources, "the kustomization builds on the base (..)")
    for r in resources + patches:
        c.check(r == ".." or r in docs, f"kustomization names {r}, which exists")
    listed = set(resources) | set(patches) | {"kustomization.yaml"}
    c.check(set(docs) <= listed, f"every YAML is in the kustomization {sorted(set(docs) - listed)}")
    base_dir = folder.parent
    base_kust = yaml.safe_load((base_dir / "kustomization.yaml").read_text())
    c.check(kust.get("namespace") == base_kust.get("namespace"),
            f"namespace {kust.get('namespace')} is the base's")
    base = [d for r in base_kust["resources"]
            for d in yaml.safe_load_all((base_dir / r).read_text()) if d]
    own = [d for r in resources if r in docs for d in docs[r]]
    return own, base, [d for p in patches for d in docs.get(p, [])]


def config_text(base) -> str:
    cms = [d for d in base if d.get("kind") == "ConfigMap"]
    return cms[0]["data"]["pacelined.textproto"] if cms else ""


def http_listen_port(text: str):
    m = re.search(r"^\s*http\s*\{[^}]*?\blisten\s*:\s*\"[^\"]*:(\d+)\"", text, re.M)
    return int(m.group(1)) if m else None


def check_pool_targets(c: Checker, pool, base, patches) -> None:
    dep = next(d for d in base if d.get("kind") == "Deployment")
    pod = dep["spec"]["template"]
    selector = pool["spec"]["selector"]["matchLabels"]
    c.check(selector.items() <= pod["metadata"]["labels"].items(),
            f"pool selector {selector} matches the pacelined pod labels")
    ports = {p["name"]: p["containerPort"] for p in pod["spec"]["containers"][0]["ports"]}
    targets = [p["number"] for p in pool["spec"]["targetPorts"]]
    c.check(targets == [ports.get("http")],
            f"pool target ports {targets} are the container's http port {ports.get('http')}")
    listen = http_listen_port(config_text(base))
    c.check(listen == ports.get("http"),
            f"config http {{ listen }} port {listen} is the container's http port")
    for p in patches:
        if p.get("kind") == "Deployment":
            c.check(p["metadata"]["name"] == dep["metadata"]["name"]
                    and p["spec"].get("replicas", 1) >= 2,
                    f"the patch runs {p['spec'].get('replicas')} replicas of the pool")


def flag(args, name: str):
    """The value of --name=VALUE or --name VALUE in a container's args."""
    for i, a in enumerate(args):
        if a.startswith(f"--{name}="):
            return a.split("=", 1)[1]
        if a == f"--{name}" and i + 1 < len(args):
            return args[i + 1]
    return None


def check_epp_ref(c: Checker, pool, own) -> None:
    ref = pool["spec"]["endpointPickerRef"]
    svcs = {d["metadata"]["name"]: d for d in own if d.get("kind") == "Service"}
    svc = svcs.get(ref["name"])
    c.check(ref.get("kind", "Service") == "Service" and svc is not None,
            f"endpointPickerRef names the Service {ref['name']} here")
    dep = one(c, own, "Deployment")
    if svc is None or dep is None:
        return
    pod = dep["spec"]["template"]
    c.check(svc["spec"]["selector"].items() <= pod["metadata"]["labels"].items(),
            "the EPP Service selects the EPP pods")
    svc_port = next((p for p in svc["spec"]["ports"] if p["port"] == ref["port"]["number"]), None)
    c.check(svc_port is not None, f"the EPP Service has port {ref['port']['number']}")
    container = pod["spec"]["containers"][0]
    by_name = {p["name"]: p["containerPort"] for p in container["ports"]}
    target = svc_port.get("targetPort", svc_port["port"]) if svc_port else None
    target = by_name.get(target, target)
    grpc_port = int(flag(container.get("args", []), "grpc-port") or 9002)
    c.check(target == grpc_port, f"that port reaches the EPP's ext_proc port {grpc_port}")
    c.check(flag(container["args"], "pool-name") == pool["metadata"]["name"],
            "the EPP's --pool-name is the pool")


def check_route(c: Checker, pool, own) -> None:
    gw = one(c, own, "Gateway")
    route = one(c, own, "HTTPRoute")
    if gw is None or route is None:
        return
    c.check(gw["apiVersion"] == route["apiVersion"] == "gateway.networking.k8s.io/v1",
            "Gateway and HTTPRoute are gateway.networking.k8s.io/v1")
    listeners = {l["name"] for l in gw["spec"]["listeners"]}
    for parent in route["spec"]["parentRefs"]:
        c.check(parent.get("kind", "Gateway") == "Gateway"
                and parent["name"] == gw["metadata"]["name"]
                and parent.get("sectionName", next(iter(listeners))) in listeners,
                f"HTTPRoute parent {parent['name']} is the Gateway and one of its listeners")
    targets = {p["number"] for p in pool["spec"]["targetPorts"]}
    v1_to_pool = False
    for rule in route["spec"]["rules"]:
        paths = [m.get("path", {}) for m in rule.get("matches", [])]
        for b in rule.get("backendRefs", []):
            to_pool = (b.get("group") == POOL_GROUP and b.get("kind") == "InferencePool"
                       and b.get("name") == pool["metadata"]["name"])
            c.check(to_pool, f"backendRef {b.get('kind')}/{b.get('name')} is the pool")
            c.check(b.get("port") in (None, *targets), f"backendRef port {b.get('port')}")
            v1_to_pool |= to_pool and {"type": "PathPrefix", "value": "/v1"} in paths
    c.check(v1_to_pool, "HTTPRoute sends PathPrefix /v1 to the pool")


def epp_config(c: Checker, own):
    """The EndpointPickerConfig the EPP's --config-file reads."""
    dep = next(d for d in own if d.get("kind") == "Deployment")
    spec = dep["spec"]["template"]["spec"]
    path = pathlib.PurePosixPath(flag(spec["containers"][0]["args"], "config-file") or "")
    mounts = {m["mountPath"]: m["name"] for m in spec["containers"][0]["volumeMounts"]}
    volume = next((v for v in spec["volumes"] if v["name"] == mounts.get(str(path.parent))), {})
    cm_name = volume.get("configMap", {}).get("name")
    cms = {d["metadata"]["name"]: d for d in own if d.get("kind") == "ConfigMap"}
    text = cms.get(cm_name, {}).get("data", {}).get(path.name)
    c.check(text is not None, f"--config-file {path} is the ConfigMap {cm_name}'s {path.name}")
    return yaml.safe_load(text or "{}") or {}


def plugin(cfg, type_name: str):
    return next((p for p in cfg.get("plugins", []) if p.get("type") == type_name), {})


def check_epp_config(c: Checker, root, cfg, base) -> None:
    c.check(cfg.get("apiVersion") == EPP_CONFIG_API and cfg.get("kind") == "EndpointPickerConfig",
            f"EPP config is {EPP_CONFIG_API} EndpointPickerConfig")
    names = {p.get("name", p.get("type")) for p in cfg.get("plugins", [])}
    refs = [p["pluginRef"] for prof in cfg.get("schedulingProfiles", []) for p in prof["plugins"]]
    for src in cfg.get("dataLayer", {}).get("sources", []):
        refs += [src["pluginRef"]] + [e["pluginRef"] for e in src.get("extractors", [])]
    c.check(bool(refs) and set(refs) <= names, f"every pluginRef is a declared plugin {refs}")

    params = plugin(cfg, "core-metrics-extractor").get("parameters", {})
    engines = {e["name"]: e for e in params.get("engineConfigs", [])}
    engine = engines.get(params.get("defaultEngine"))
    c.check(engine is not None, f"defaultEngine {params.get('defaultEngine')} is an engineConfig")
    engine = engine or {}
    known = metric_names(root)
    for key in ("queuedRequestsSpec", "runningRequestsSpec", "kvUsageSpec", "cacheInfoSpec"):
        name = re.sub(r"\{.*\}$", "", engine.get(key, "")).strip()
        c.check(name in known, f"{key} {name!r} is in deploy/metrics_names.txt")
    labels = {engine.get("cacheBlockSizeLabelName", "block_size"),
              engine.get("cacheNumBlocksLabelName", "num_gpu_blocks")}
    c.check(labels == CACHE_INFO_LABELS, f"cache-info labels {sorted(labels)}")

    source = plugin(cfg, "metrics-data-source").get("parameters", {})
    dep = next(d for d in base if d.get("kind") == "Deployment")
    container = dep["spec"]["template"]["spec"]["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    c.check(source.get("port") == ports.get("metrics") and source.get("path") == "/metrics",
            f"metrics-data-source scrapes :{source.get('port')}{source.get('path')}, "
            f"the container's metrics port {ports.get('metrics')}")


def check_epp_pod(c: Checker, own) -> None:
    """The namespace enforces the restricted Pod Security Standard."""
    dep = next(d for d in own if d.get("kind") == "Deployment")
    spec = dep["spec"]["template"]["spec"]
    psc = spec.get("securityContext", {})
    accounts = {d["metadata"]["name"] for d in own if d.get("kind") == "ServiceAccount"}
    c.check(spec.get("serviceAccountName") in accounts, "the EPP's ServiceAccount is here")
    c.check(psc.get("runAsNonRoot") is True
            and psc.get("seccompProfile", {}).get("type") == "RuntimeDefault",
            "EPP pod: runAsNonRoot, RuntimeDefault seccomp")
    for ctr in spec["containers"]:
        csc = ctr.get("securityContext", {})
        c.check(csc.get("allowPrivilegeEscalation") is False
                and csc.get("capabilities", {}).get("drop") == ["ALL"],
                f"EPP container {ctr['name']}: no privilege escalation, drops ALL")
    rules = [r for d in own if d.get("kind") == "Role" for r in d["rules"]]
    granted = {(g, res) for r in rules for g in r["apiGroups"] for res in r["resources"]}
    c.check({(POOL_GROUP, "inferencepools"), ("", "pods")} <= granted,
            "the EPP's Role reads inferencepools and pods")


def check_no_secrets(c: Checker, docs, folder: pathlib.Path) -> None:
    kinds = {d.get("kind") for ds in docs.values() for d in ds}
    c.check("Secret" not in kinds, "no Secret in inference-pool/")
    text = "\n".join(p.read_text() for p in folder.glob("*.yaml"))
    c.check(not re.search(r"api_key|Bearer\s+[A-Za-z0-9._-]{8,}", text),
            "no API key or bearer token in inference-pool/")


def main() -> int:
    root = repo_root()
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    c = Checker()
    folder = root / "deploy" / "k8s" / "inference-pool"
    docs = load_yaml_dir(c, folder)
    if c.failures:
        return c.finish()
    own, base, patches = kustomize_resources(c, folder, docs)
    crd = pathlib.Path(sys.argv[2])
    if not c.check(crd.is_file(), f"the CRD {crd} exists (PACELINE_SHARED_DIR)"):
        return c.finish()
    validator, kind = pool_schema(c, crd)
    pool = one(c, own, kind)
    if pool is not None:
        check_pool_schema(c, validator, kind, pool)
        check_pool_targets(c, pool, base, patches)
        check_epp_ref(c, pool, own)
        check_route(c, pool, own)
    check_epp_config(c, root, epp_config(c, own), base)
    check_epp_pod(c, own)
    check_no_secrets(c, docs, folder)
    return c.finish()


if __name__ == "__main__":
    sys.exit(main())
