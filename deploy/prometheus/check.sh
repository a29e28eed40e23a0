#!/bin/sh
# Static checks of the Prometheus config and rules plus the rule unit tests.
# Exits non-zero on the first failure. Needs Debian's `prometheus` package (promtool).
set -eu
cd "$(dirname "$0")"
command -v promtool >/dev/null 2>&1 || { echo "check.sh: promtool not found (apt-get install prometheus)" >&2; exit 2; }
promtool check config prometheus.yml
promtool check rules alerts.yml
n=0
for t in tests/*.yml; do
  promtool test rules "$t"
  n=$((n + 1))
done
echo "check.sh: all Prometheus checks passed"
rules=$(grep -c '^ *- alert:' alerts.yml || true)
if command -v node >/dev/null 2>&1; then
  node ../../scripts/record-acceptance.mjs issue8/promtool \
    "promtool check config and rules pass ($rules alerts); $n rule unit-test files pass" true "deploy/check.sh"
fi
