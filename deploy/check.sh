#!/bin/sh
# Static checks of everything in deploy/: Prometheus config, rules and rule unit tests; systemd
# units (systemd-analyze verify); compose YAML; smcroute and igmpproxy configs (each loaded
# for real inside a throwaway network namespace with stand-in veth eth0/eth1/eth2); the FRR
# PIM config (vtysh's dry run; the testbed loads it into running routers, e2e/test/pim.test.ts).
# Needs root for the namespace; exits non-zero on the first failure.
set -eu
cd "$(dirname "$0")"
fail() { echo "deploy/check.sh: FAIL: $*" >&2; exit 1; }

./prometheus/check.sh

# systemd units: verify with the binaries replaced by /bin/true (they need not be installed).
tmp=$(mktemp -d /tmp/lc-deploy-check.XXXXXX)
ns="lc-deploycheck-$$"
cleanup() { ip netns del "$ns" 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
sed 's#/usr/local/bin/layercast-server#/bin/true#' systemd/layercast-server.service > "$tmp/layercast-server.service"
sed 's#/usr/local/bin/layercast-player#/bin/true#' systemd/layercast-player@.service > "$tmp/layercast-player@main.service"
out=$(systemd-analyze verify "$tmp/layercast-server.service" "$tmp/layercast-player@main.service" 2>&1 || true)
[ -z "$out" ] || fail "systemd-analyze verify: $out"
echo "systemd units: OK"

python3 - <<'PY' || fail "compose.yaml"
import yaml
d = yaml.safe_load(open("container/compose.yaml"))
for name, s in d["services"].items():
    assert s.get("network_mode") == "host", f"{name}: must use host networking (multicast)"
print("compose.yaml: OK,", ", ".join(sorted(d["services"])), "on host networking")
PY

ip netns add "$ns"
ip -n "$ns" link set lo up
for i in 0 1 2; do
  # veth pairs (the kernel may lack the dummy driver); the peers just need to be up.
  ip -n "$ns" link add "eth$i" type veth peer name "peer$i"
  ip -n "$ns" link set "peer$i" up
  ip -n "$ns" link set "eth$i" multicast on up
done
ip -n "$ns" addr add 192.168.10.1/24 dev eth0
ip -n "$ns" addr add 192.168.20.1/24 dev eth1
ip -n "$ns" addr add 192.168.30.1/24 dev eth2

ip netns exec "$ns" smcrouted -F router/smcroute.conf -l info > "$tmp/smc.log" 2>&1 || { cat "$tmp/smc.log"; fail "smcroute.conf"; }
grep -qi "error" "$tmp/smc.log" && { cat "$tmp/smc.log"; fail "smcroute.conf"; }
echo "smcroute.conf: OK"

# igmpproxy has no check mode: run it for two seconds and look at what it says.
ip netns exec "$ns" timeout 2 igmpproxy -d -v -v router/igmpproxy.conf > "$tmp/igmp.log" 2>&1 || true
vifs=$(grep -c "adding VIF" "$tmp/igmp.log" || true)
[ "$vifs" -eq 3 ] || { grep -iE "vif|error|warn" "$tmp/igmp.log"; fail "igmpproxy.conf: expected 3 VIFs (eth0 up, eth1+eth2 down), got $vifs"; }
echo "igmpproxy.conf: OK ($vifs VIFs)"
out=$(vtysh -C -f router/frr/frr.conf 2>&1) || fail "router/frr/frr.conf: $out"
[ -z "$out" ] || fail "router/frr/frr.conf: $out"
echo "frr.conf: OK (vtysh dry run)"
echo "deploy/check.sh: all deploy checks passed"
