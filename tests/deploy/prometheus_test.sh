#!/usr/bin/env bash
# promtool over deploy/prometheus: the scrape configs, the alert rules and
# their unit tests. Exits 77 (skipped) without promtool (Debian package:
# prometheus). prometheus-kubernetes.yml is skipped when promtool lacks
# Kubernetes service discovery (Debian's build does).
# usage: prometheus_test.sh DEPLOY_PROMETHEUS_DIR
set -euo pipefail
dir="$1"

if ! command -v promtool >/dev/null; then
  echo "SKIP: promtool not found (Debian package: prometheus)"
  exit 77
fi
cd "$dir"
promtool check config prometheus.yml
promtool check rules alerts.yml
promtool test rules alerts_test.yml

if out="$(promtool check config prometheus-kubernetes.yml 2>&1)"; then
  echo "$out"
elif grep -q 'kubernetes_sd_configs not found' <<<"$out"; then
  echo "SKIP (prometheus-kubernetes.yml): this promtool has no Kubernetes service discovery"
else
  echo "$out"
  exit 1
fi
