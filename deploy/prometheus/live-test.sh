#!/bin/sh
# Live test: Debian's Prometheus (on loopback inside a test network namespace) scrapes a real
# layercast-server and real layercast-player processes; every alert quantity and every Grafana
# panel query must return data. Needs root (network namespaces), prometheus, igmpproxy, curl,
# and the binaries (target/debug or $LAYERCAST_BIN_DIR); skips loudly if the binaries are absent.
# The test itself lives in server/dashboard/test/live/ (shares the namespace harness with the
# dashboard's browser test).
set -eu
cd "$(dirname "$0")/../../server/dashboard"
exec npx vitest run test/live "$@"
