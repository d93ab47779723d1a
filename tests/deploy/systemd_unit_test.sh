#!/usr/bin/env bash
# Checks deploy/systemd/pacelined.service offline, with no running systemd:
#   1. `systemd-analyze verify`, on a copy whose ExecStart= is /bin/true
#      (verify insists the binary exists, and /usr/local/bin/pacelined is
#      not installed here; the rest of the unit is checked as written);
#   2. `systemd-analyze security --offline=true`, printing the exposure
#      score and failing above MAX_EXPOSURE.
# Exits 77 (skipped) without systemd-analyze.
# usage: systemd_unit_test.sh UNIT_FILE [MAX_EXPOSURE]
set -euo pipefail

unit="$1"
max_exposure="${2:-2.0}"

if ! command -v systemd-analyze >/dev/null; then
  echo "SKIP: systemd-analyze not found (Debian package: systemd)"
  exit 77
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
copy="$work/$(basename "$unit")"
sed 's#^ExecStart=[^ ]*#ExecStart=/bin/true#' "$unit" >"$copy"
grep -q '^ExecStart=/bin/true --config ' "$copy"

# verify prints problems to stderr and may exit 0 for some of them (e.g.
# an unknown setting): any output at all is a failure.
cd "$work"
if ! out="$(systemd-analyze verify --man=no "$copy" 2>&1)" || [[ -n "$out" ]]; then
  echo "FAIL: systemd-analyze verify:"
  echo "$out"
  exit 1
fi
echo "ok: systemd-analyze verify"

if ! systemd-analyze security --help 2>&1 | grep -q -- '--offline'; then
  echo "SKIP (security): systemd-analyze has no --offline (systemd < 250)"
  exit 0
fi
report="$(systemd-analyze security --offline=true --no-pager "$copy" 2>&1)" || {
  echo "$report"
  echo "FAIL: systemd-analyze security --offline=true"
  exit 1
}
line="$(grep 'Overall exposure level' <<<"$report")"
score="$(sed -E 's/.*: ([0-9]+\.[0-9]+) .*/\1/' <<<"$line")"
echo "exposure: $score (max $max_exposure) -- $line"
if ! awk -v s="$score" -v m="$max_exposure" 'BEGIN { exit !(s + 0 <= m + 0) }'; then
  grep '✗' <<<"$report" || true
  echo "FAIL: exposure $score > $max_exposure"
  exit 1
fi
echo "ok: systemd-analyze security"
