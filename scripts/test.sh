#!/usr/bin/env bash
# The full test command (`make test`): sets up what is missing, then runs every suite in the
# repository and prints each runner's summary. Exits non-zero if any suite fails.
# Long suites have their own commands (see README.md): `make catalogue`, `make e2e-full`.
set -uo pipefail
cd "$(dirname "$0")/.."
export LAYERCAST_ROOT=$(pwd)
export LAYERCAST_ACCEPTANCE_DIR="$LAYERCAST_ROOT/target/acceptance"
# The binaries setup.sh builds; real-stack tests must find them and run, never skip.
export LAYERCAST_BIN_DIR="$LAYERCAST_ROOT/target/release" LAYERCAST_REQUIRE_BINS=1 LAYERCAST_REQUIRE_NETNS=1
mkdir -p "$LAYERCAST_ACCEPTANCE_DIR"

scripts/setup.sh || { echo "setup failed"; exit 1; }

passed=0; failed=0; failed_names=()
step() {
  local name=$1; shift
  echo
  echo "=== $name: $*"
  local t0=$SECONDS
  if "$@"; then
    passed=$((passed + 1)); echo "=== $name: ok ($((SECONDS - t0)) s)"
  else
    failed=$((failed + 1)); failed_names+=("$name"); echo "=== $name: FAILED ($((SECONDS - t0)) s)"
  fi
}

step rustfmt cargo fmt --all --check
step clippy cargo clippy --workspace --all-targets --quiet -- -D warnings
step cargo-test cargo test --workspace --release -- --skip settles_and_sheds
# The ERA/PLM settle-and-shed tests behind a 1 Mbit/s emulated link measure sub-millisecond
# packet-pair timing: when the host is loaded, the link's timer releases a pair's second packet
# late and the controller drops a layer for a while (cause and captures in docs/player.md). They
# run on their own, after the heavy suites, and once more if the first attempt fails: the first
# failure is printed in full, so flakiness shows instead of hiding. (`--workspace` keeps the
# features unified as in the main run, so nothing is rebuilt.)
settle() {
  cargo test --workspace --release --test netns_control && return 0
  echo "netns_control failed once (host timing, docs/player.md): running it again"
  cargo test --workspace --release --test netns_control
}
step settle-tests settle
if [ -f package-lock.json ]; then
  step ts-typecheck npm run --workspaces --if-present typecheck
  step ts-lint npm run --workspaces --if-present lint
  step npm-test npm run --workspaces --if-present test
  # Real Prometheus scraping a real server (ERA + TFMCC sessions) and players (~1.5 min).
  step live-prometheus npm run test:live -w server/dashboard
fi
[ -x deploy/check.sh ] && step deploy-checks deploy/check.sh
step acceptance-table node scripts/acceptance.mjs

echo
echo "suites: ${passed} passed, ${failed} failed"
if [ "$failed" -gt 0 ]; then
  echo "failed suites: ${failed_names[*]}"
  exit 1
fi
