#!/bin/bash
# Builds the Layercast server and player images with podman on a machine that reaches Debian's
# mirrors but no container registry, then runs them with host networking inside a throwaway
# network namespace and checks that a player in a container receives a server in a container.
#
#   deploy/container/build-local.sh          (what `make containers` runs; root, Debian 12)
#
# Steps: a minimal bookworm root file system by debootstrap, imported as
# localhost/layercast-debian:bookworm (cached in .cache/container/); the release binaries and the
# built dashboard staged as the build context; Containerfile.local's `server` and `player`
# targets built; then both run in namespace lc-ctr-<pid> (loopback multicast only, nothing leaves
# the namespace) for a few seconds, and the server's viewer list must show the player with
# packets received. Everything it starts is removed on exit, also on Ctrl-C.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cache="$root/.cache/container"
base=localhost/layercast-debian:bookworm
ns="lc-ctr-$$"
ctx=$(mktemp -d /tmp/lc-ctr-ctx.XXXXXX)
say() { echo "[containers] $*"; }
die() { echo "[containers] FAIL: $*" >&2; exit 1; }
cleanup() {
  podman rm -f "lc-ctr-server-$$" "lc-ctr-player-$$" >/dev/null 2>&1 || true
  ip netns del "$ns" 2>/dev/null || true
  rm -rf "$ctx"
}
trap cleanup EXIT
export CONTAINERS_CONF="$root/deploy/container/containers.conf"
trap 'exit 130' INT TERM

[ "$(id -u)" = 0 ] || die "needs root (debootstrap, podman, ip netns)"
missing=""
for c in podman debootstrap runc curl; do command -v "$c" >/dev/null || missing="$missing $c"; done
if [ -n "$missing" ]; then
  say "installing$missing"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q $missing >/dev/null
fi

# 1. The base image.
if ! podman image exists "$base"; then
  mkdir -p "$cache"
  if [ ! -s "$cache/bookworm-minbase.tar" ]; then
    say "debootstrap bookworm (minbase) — a few minutes, once"
    rm -rf "$cache/rootfs"
    debootstrap --variant=minbase bookworm "$cache/rootfs" http://deb.debian.org/debian \
      > "$cache/debootstrap.log" 2>&1 || { tail "$cache/debootstrap.log"; die "debootstrap"; }
    # The image needs the security and updates suites that a Debian image has.
    cat > "$cache/rootfs/etc/apt/sources.list" <<'SRC'
deb http://deb.debian.org/debian bookworm main
deb http://deb.debian.org/debian bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
SRC
    tar -C "$cache/rootfs" -cf "$cache/bookworm-minbase.tar" .
    rm -rf "$cache/rootfs"
  fi
  say "importing $base"
  podman import "$cache/bookworm-minbase.tar" "$base" >/dev/null
fi

# 2. The build context: binaries and the dashboard, built if missing.
bins="${LAYERCAST_BIN_DIR:-$root/target/release}"
if [ ! -x "$bins/layercast-server" ] || [ ! -x "$bins/layercast-player" ]; then
  say "building release binaries"
  (cd "$root" && cargo build --release -q -p layercast-server -p layercast-player)
  bins="$root/target/release"
fi
if [ ! -f "$root/server/dashboard/dist/index.html" ]; then
  say "building the dashboard"
  (cd "$root" && npm run -s build -w server/dashboard)
fi
mkdir -p "$ctx/bin"
cp "$bins/layercast-server" "$bins/layercast-player" "$ctx/bin/"
cp -r "$root/server/dashboard/dist" "$ctx/dashboard"

# 3. The images.
for t in server player; do
  say "building localhost/layercast-$t"
  podman build -q -f "$root/deploy/container/Containerfile.local" --build-arg BASE="$base" \
    --target "$t" -t "localhost/layercast-$t" "$ctx" >/dev/null
done
podman images --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep 'localhost/layercast-' | sed 's/^/[containers] image /'

# 4. Run both inside a namespace of our own. `--network ns:PATH` is host networking, in that
# namespace: no bridge, the container's sockets are the namespace's (`ip netns exec podman`
# would remount /sys and hide the cgroup mounts podman needs).
ip netns add "$ns"
ip -n "$ns" link set lo multicast on up
ip -n "$ns" route add 224.0.0.0/4 dev lo
session='{"name":"ctr","protocol":"era","layers":4,"layer_rate_bps":100000,"packet_size":500,"bunch_len":2,"group":"239.255.99.0"}'
podman run -d --name "lc-ctr-server-$$" --network "ns:/run/netns/$ns" localhost/layercast-server \
  --dev --http-addr 127.0.0.1:18080 --interface 127.0.0.1 --ttl 1 --announce "" --session "$session" >/dev/null
for _ in $(seq 50); do
  ip netns exec "$ns" curl -sf http://127.0.0.1:18080/api/sessions >/dev/null 2>&1 && break
  sleep 0.2
done
ip netns exec "$ns" curl -sf http://127.0.0.1:18080/api/sessions >/dev/null \
  || { podman logs "lc-ctr-server-$$" | tail; die "server container does not answer"; }
say "server container answers on 127.0.0.1:18080 inside $ns"
podman run --name "lc-ctr-player-$$" --network "ns:/run/netns/$ns" localhost/layercast-player \
  --session-url http://127.0.0.1:18080/api/sessions/ctr/announcement --interface 127.0.0.1 \
  --fixed-layers 4 --duration 6 --viewer-id ctr-player >/dev/null 2>&1 \
  || { podman logs "lc-ctr-player-$$" | tail; die "player container failed"; }
viewers=$(ip netns exec "$ns" curl -sf http://127.0.0.1:18080/api/viewers)
python3 - "$viewers" <<'PY' || die "the server saw no packets received by the container player"
import json, sys
v = json.loads(sys.argv[1])
rows = v if isinstance(v, list) else v.get("viewers", [])
me = [r for r in rows if r.get("viewer_id", r.get("id")) == "ctr-player"]
assert me, f"no viewer ctr-player in {rows}"
r = me[0]
print("[containers] player container: layers", r.get("layers"), "rate_bps", r.get("rate_bps"))
assert (r.get("layers") or 0) >= 1 and (r.get("rate_bps") or 0) > 0, r
PY
say "OK: images built, server and player containers ran with host networking"
size=$(podman image inspect localhost/layercast-server --format '{{.Size}}')
node "$root/scripts/record-acceptance.mjs" issue8/containers \
  "server and player images built (server $((size / 1000000)) MB); player container held 4 layers from the server container" \
  true "make containers"
