# Cargo features of the testbed build, sourced by setup.sh and test.sh so that every cargo run
# builds the same binaries: the `research` feature adds the papers' baselines and unicast TFRC
# to the server and the player (the e2e checks run them); the product build omits it.
# `layercast-session/harness` turns on the in-process session harness, so its tests
# (crates/session/tests/harness.rs) run with the workspace's.
LAYERCAST_FEATURES="--features layercast-server/research,layercast-player/research,layercast-session/harness"
