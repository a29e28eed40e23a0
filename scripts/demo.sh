#!/usr/bin/env bash
# `make demo`: a live Layercast session on emulated bottlenecks, with the dashboard (docs/demo.md).
#
#   scripts/demo.sh [--duration SECS] [--source auto|synthetic|NAME] [--status-every SECS]
#                   [--scenario FILE] [--out DIR] [--port P]
#
# Builds what is missing (scripts/setup.sh, then the dashboard when its sources are newer than
# its build), then runs `layercast-e2e demo`: namespaces from research/scenarios/demo.yaml, the server with
# a test-pattern source (or the synthetic layered source when the server has none; it says so),
# one player per viewer, iperf3 cross traffic, a status line every few seconds, the dashboard URL
# reachable from this machine. Ctrl-C (or --duration) tears everything down.
set -euo pipefail
cd "$(dirname "$0")/.."

case " $* " in
  *" -h "*|*" --help "*)
    sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'
    exit 0;;
esac

if [ "$(id -u)" != 0 ]; then
  echo "demo: needs root (network namespaces, veth pairs, tc); run: sudo make demo" >&2
  exit 1
fi

scripts/setup.sh

dash=server/dashboard
if [ -f "$dash/package.json" ]; then
  if [ ! -f "$dash/dist/index.html" ] || [ -n "$(find "$dash/src" "$dash/index.html" "$dash/package.json" -newer "$dash/dist/index.html" -print -quit 2>/dev/null)" ]; then
    echo "[demo] building the dashboard (npm run build -w $dash)" >&2
    npm run build -w "$dash" --silent >/tmp/layercast-dashboard-build.log 2>&1 || {
      tail -20 /tmp/layercast-dashboard-build.log >&2
      echo "[demo] dashboard build failed (log: /tmp/layercast-dashboard-build.log); the demo serves the API only" >&2
    }
  fi
fi

# Leftovers of a demo or test that was killed hard (owner process gone) would hold addresses.
node e2e/bin/layercast-e2e.mjs cleanup >/dev/null 2>&1 || true
for ifc in $(ip -o link show | sed -n 's/^[0-9]*: \(lcd[0-9]*\)@.*/\1/p'); do
  kill -0 "${ifc#lcd}" 2>/dev/null || ip link del "$ifc" 2>/dev/null || true
done

# exec: Ctrl-C reaches the testbed process directly, which tears the network down.
exec node e2e/bin/layercast-e2e.mjs demo "$@"
