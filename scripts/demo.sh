#!/usr/bin/env bash
# `make demo`: a live Layercast session. See README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
echo "demo: the live demo is not assembled yet; running the simulator on ERA Experiment I instead" >&2
exec target/release/layercast-sim run scenarios/era-exp1-convergence.yaml "$@"
