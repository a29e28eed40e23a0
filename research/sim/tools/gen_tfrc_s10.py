#!/usr/bin/env python3
"""Generates research/scenarios/tfrc-s10-*.yaml, the TFRC fairness sweep (tfrc-tfmcc-pcc.md S10):
n TFRC + n TCP, n in {1,2,4,8,16,32}, 1.5 and 15 Mbit/s, drop-tail and RED.
Usage: python3 research/sim/tools/gen_tfrc_s10.py scenarios   (docs/simulator.md, S10)."""
import sys
out=sys.argv[1]
for C in (1500, 15000):
  for q in ('droptail','red'):
    for n in (1,2,4,8,16,32):
      rtt=0.06
      fair_pkts = C*1000/(2*n)/8000*rtt
      svc_ms = 8000/(C*1000)*1000
      lim = int(round(2*C*1000*rtt/8000))  # 2 x BDP in 1000-B packets
      if q=='droptail':
        qd=f"{{kind: droptail, limit_packets: {lim}}}"
      else:
        qd=f"{{kind: red, min_th: {max(5,lim//4)}, max_th: {max(15,3*lim//4)}, limit_packets: {lim}}}"
      cname = '15M' if C==15000 else '1.5M'
      tag=f"{cname} {q} n={n}"
      name=f"tfrc-s10-{'15m' if C==15000 else '1m5'}-{q}-n{n:02d}"
      L=[]
      L.append(f"""# TFRC fairness sweep (tfrc-tfmcc-pcc.md S10, dissertation Fig. 3.5): {n} TFRC + {n} TCP NewReno on a
# {C/1000} Mbit/s {q} bottleneck, queue 2 x BDP ({lim} packets at RTT 60 ms{', RED thresholds 1/4 and 3/4 of it' if q=='red' else ''}),
# 1000-B packets, 5 ms access + 20 ms bottleneck, TCP send jitter of one bottleneck service time
# ({svc_ms:.2f} ms), starts uniform in 0-5 s, 150 s, the dissertation's last 60 s (90-150 s).
# Fair share {fair_pkts:.1f} packets/RTT: the normalized-TCP band applies only where it is >= 8.
# Generated (docs/simulator.md, S10).
name: {name}
title: TFRC fairness, {tag}
source: tfrc-tfmcc-pcc.md S10
duration_s: 150
seeds: 3
fast_seeds: 1
topology:
  nodes: [sf, st, r0, r1, d]
  links:
    - {{from: sf, to: r0, rate_kbps: 1000000, delay_ms: 5, queue: {{kind: droptail, limit_packets: 1000}}}}
    - {{from: st, to: r0, rate_kbps: 1000000, delay_ms: 5, jitter_ms: {svc_ms:.3f}, queue: {{kind: droptail, limit_packets: 1000}}}}
    - {{from: r0, to: r1, rate_kbps: {C}, delay_ms: 20, queue: {qd}}}
    - {{from: r1, to: d, rate_kbps: 1000000, delay_ms: 5, queue: {{kind: droptail, limit_packets: 1000}}}}
flows:""")
      for i in range(1,n+1):
        L.append(f"  - {{name: tfrc{i}, type: tfrc-pcc, from: sf, to: d, start_jitter_s: 5}}")
      for i in range(1,n+1):
        L.append(f"  - {{name: tcp{i}, type: tcp, from: st, to: d, variant: newreno, packet_size: 1000, start_jitter_s: 5}}")
      tf=", ".join(f"tfrc{i}/receiver" for i in range(1,n+1))
      tc=", ".join(f"tcp{i}" for i in range(1,n+1))
      L.append("measurements:")
      L.append(f"""  - id: tfmcc/S10 utilization, {tag} (goodput / capacity)
    metric: sum_throughput_kbps
    of: [{tf}, {tc}]
    window: [90, 150]
    min: {0.9*C:g}
    published: ">= 90 % of {C} kbit/s (dissertation: always > 90 %)"
""")
      tcp_ki = ("\n    known_issue: \"one TCP against one TFRC on 15 Mbit/s RED is bimodal over seeds (TCP 206 / 7396 / 526 kbit/s, seeds 1-3): "
                "in seed 1 TCP stays at 100-250 kbit/s from 40 s on while TFRC runs at 14.8 Mbit/s; TFRC loses 0.02 % of its packets "
                "but TCP retransmits 23 % of its segments, which RED's per-packet drops cannot explain: our TCP model at a tiny window is the suspect (go-back-N after RTO, no SACK); not traced further\"") if C == 15000 and q == 'red' and n == 1 else ""
      band = f"\n    min: {0.75*C/2:g}\n    max: {1.25*C/2:g}" if fair_pkts>=8 else ""
      pub = f"mean normalized TCP in [0.75, 1.25] = summed TCP in [{0.75*C/2:g}, {1.25*C/2:g}]" if fair_pkts>=8 else f"report (fair share {fair_pkts:.1f} < 8 packets/RTT; 1.0 = {C/2:g})"
      L.append(f"""  - id: tfmcc/S10 TCP goodput summed, {tag} (kbit/s; normalized x {C/2:g})
    metric: sum_throughput_kbps
    of: [{tc}]
    window: [90, 150]{band}
    published: "{pub}"{tcp_ki}
""")
      cov_ki = ("\n    known_issue: \"at 1.5 Mbit/s with n >= 8 (fair share <= 1.4 packets/RTT) TFRC's 1-s rate varies more than TCP's "
                "(ratio 1.4-2.3, seed 1); the dissertation says TCP's variance is higher everywhere; cause not traced\"") if C == 1500 and n >= 8 else ""
      L.append(f"""  - id: tfmcc/S10 TFRC / TCP mean per-flow CoV(1 s), {tag}
    metric: cov_ratio
    of: [{tf}]
    versus: [{tc}]
    window: [90, 150]
    max: 1.0
    published: "< 1 (TFRC smoother than TCP)"{cov_ki}
""")
      open(f"{out}/{name}.yaml","w").write("\n".join(L))
