#!/usr/bin/env node
// Regenerates docs/acceptance.md: every acceptance check of the specs and the issues, with its
// latest measured value, the command that measures it, and pass or fail.
//
// Checks come from the acceptance tables of ../shared/specs/*.md (parsed here, never copied by
// hand) and from ISSUE_CHECKS below. Measurements come from JSON files that tests and benchmarks
// write into $LAYERCAST_ACCEPTANCE_DIR (default target/acceptance): one file per check,
//   { "id": "era/AC-0", "value": "…", "pass": true|false|null, "command": "…", "at": "ISO time" }
// A check with no new measurement keeps the row of the previous docs/acceptance.md, so numbers
// are only ever written by a measurement.
import fs from 'node:fs';
import path from 'node:path';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const specsDir = process.env.LAYERCAST_SPECS_DIR || path.join(root, '..', 'shared', 'specs');
const resultsDir = process.env.LAYERCAST_ACCEPTANCE_DIR || path.join(root, 'target', 'acceptance');
const outFile = path.join(root, 'docs', 'acceptance.md');

const SPEC_PREFIX = {
  'era.md': 'era', 'plm.md': 'plm', 'tfrc-tfmcc-pcc.md': 'tfmcc',
  'delay-based.md': 'delay', 'active-networks.md': 'active',
};

// Checks that the issues add (benchmarks and behaviours the specs do not list).
const ISSUE_CHECKS = [
  ['plm/S10-exp', 'S10 with exponential layers (32..1024 kbit/s): RLM baseline mean loss', 'loss 1.6 % ±0.5 (plm.md S10)'],
  ['issue24/variable-capacity-fifo', 'Variable capacity 1 / 2.5 / 0.6 / 1 Mbit/s, one LCC viewer alone (RFC 8867 §5.1), drop-tail FIFO, 300 ms', 'queue delay p95 < 100 ms; at or below the new capacity ≤ 2 s after a drop; 85 % of the new capacity ≤ 10 s after a rise'],
  ['issue24/variable-capacity-fqcodel', 'Variable capacity 1 / 2.5 / 0.6 / 1 Mbit/s, one LCC viewer alone (RFC 8867 §5.1), FQ-CoDel', 'queue delay p95 < 100 ms; at or below the new capacity ≤ 2 s after a drop; 85 % of the new capacity ≤ 10 s after a rise'],
  ['issue24/three-sessions-fifo', 'Three LCC sessions on one 3.5 Mbit/s bottleneck, starting at 0, 20, 40 s (§5.4), drop-tail FIFO, 300 ms', 'Jain ≥ 0.9 over 80-120 s; loss < 2 % per receiver; ≤ 12 layer changes per minute per viewer over 60-120 s'],
  ['issue24/three-sessions-fqcodel', 'Three LCC sessions on one 3.5 Mbit/s bottleneck, starting at 0, 20, 40 s (§5.4), FQ-CoDel', 'Jain ≥ 0.9 over 80-120 s; loss < 2 % per receiver'],
  ['issue24/rtt-fairness-fifo', 'Three LCC sessions, base RTTs 40 / 70 / 120 ms (§5.5), drop-tail FIFO, 300 ms', 'reported: Jain, rates, loss, queue delay, layer changes'],
  ['issue24/rtt-fairness-fqcodel', 'Three LCC sessions, base RTTs 40 / 70 / 120 ms (§5.5), FQ-CoDel', 'reported: Jain, rates, loss, queue delay, layer changes'],
  ['issue24/long-cubic-fifo', 'One LCC viewer and one long Linux CUBIC flow on 2 Mbit/s (§5.6), drop-tail FIFO, 300 ms', 'viewer 0.5-2 × its fair share (500-2000 kbit/s) over 20-120 s; never below the base layer'],
  ['issue24/long-cubic-fqcodel', 'One LCC viewer and one long Linux CUBIC flow on 2 Mbit/s (§5.6), FQ-CoDel', 'viewer 0.5-2 × its fair share (500-2000 kbit/s) over 20-120 s; never below the base layer'],
  ['issue24/long-bbr-fifo', 'One LCC viewer and one long Linux BBR flow on 2 Mbit/s (§5.6), drop-tail FIFO, 300 ms', 'viewer 0.5-2 × its fair share (500-2000 kbit/s) over 20-120 s; never below the base layer'],
  ['issue24/long-bbr-fqcodel', 'One LCC viewer and one long Linux BBR flow on 2 Mbit/s (§5.6), FQ-CoDel', 'viewer 0.5-2 × its fair share (500-2000 kbit/s) over 20-120 s; never below the base layer'],
  ['issue24/short-tcp-fifo', 'One LCC viewer and ten short CUBIC transfers on 2 Mbit/s (§5.7), drop-tail FIFO, 300 ms', 'never below the base layer; rate, loss, queue delay reported'],
  ['issue24/short-tcp-fqcodel', 'One LCC viewer and ten short CUBIC transfers on 2 Mbit/s (§5.7), FQ-CoDel', 'never below the base layer; rate, loss, queue delay reported'],
  ['issue24/pause-resume-fifo', 'Three LCC sessions, one viewer leaving at 40 s and back at 60 s (§5.8), drop-tail FIFO, 300 ms', 'Jain ≥ 0.9 over 80-120 s; loss < 2 %'],
  ['issue24/pause-resume-fqcodel', 'Three LCC sessions, one viewer leaving at 40 s and back at 60 s (§5.8), FQ-CoDel', 'Jain ≥ 0.9 over 80-120 s; loss < 2 %'],
  ['issue24/tcp-model-cubic-1', 'Linux TCP agent check: one CUBIC flow, 10 Mbit/s, 300-ms drop-tail, RTT 40 ms (sim and kernel)', 'reported; sim vs testbed table in docs/simulator.md'],
  ['issue24/tcp-model-cubic-2', 'Linux TCP agent check: two CUBIC flows, 10 Mbit/s, 300-ms drop-tail, RTT 40 ms (sim and kernel)', 'reported; sim vs testbed table in docs/simulator.md'],
  ['issue24/tcp-model-bbr-1', 'Linux TCP agent check: one BBR flow, 10 Mbit/s, 300-ms drop-tail, RTT 40 ms (sim and kernel)', 'reported; sim vs testbed table in docs/simulator.md'],
  ['issue24/tcp-model-bbr-2', 'Linux TCP agent check: two BBR flows, 10 Mbit/s, 300-ms drop-tail, RTT 40 ms (sim and kernel)', 'reported; sim vs testbed table in docs/simulator.md'],
  ['issue24/demo-v4m-tcp', 'The demo\'s v4m-tcp viewer (4 Mbit/s drop-tail, 100 ms, one CUBIC flow), LCC, synthetic layers (research/scenarios/demo.yaml)', 'at least 640x360 at 15 fps most of the time (≥ 50 % of 20-60 s): 2 of the 6 L3T2 layers (4 of 9 in the L3T3 ladder the issue named)'],
  ['issue3/bench-era', 'ERA per-packet cost', '≥ 5 M packets/s per core'],
  ['issue3/bench-plm', 'PLM per-packet cost', '≥ 5 M packets/s per core'],
  ['issue3/bench-tfmcc', 'TFMCC sender per-report cost', 'reported'],
  ['issue4/bench-events', 'Simulator events per second, one core', '≥ 2 M events/s'],
  ['issue4/tfmcc-10k', 'TFMCC 10,000 receivers, 200 s scenario end to end', '< 60 s wall, < 2 GB'],
  ['flid/Ch4-ExpI', 'FLID-DL baseline, thesis Ch.4 Exp. I (sim): convergence, loss, throughput, E, levels', 'thesis Table 4-8 (±25 % times, ±10 % rates, ±0.05 E)'],
  ['flid/Ch4-ExpII-I', 'FLID-DL baseline with 2 TCP, each behind 100 Kbps access links, 300 Kbps bottleneck (sim)', 'FLID-DL 87 Kbps ±10 %, F 0.90 ±25 %'],
  ['flid/Ch4-ExpII-II', 'FLID-DL baseline between two TCP Reno on 300 Kbps FIFO (sim)', 'F 1.3 ±25 %, FLID-DL 95 Kbps ±10 %'],
  ['flid/Ch4-ExpII-III', 'FLID-DL baseline between two TCP Reno on 10 Mbps FIFO (sim)', 'F 4.1 ±25 %, FLID-DL 5837 Kbps ±10 %'],
  ['flid/Ch4-ExpIV', 'FLID-DL baseline, 2 sessions on 600 Kbps (sim): E, loss, Q, I', 'thesis Table 4-14 n = 2'],
  ['webrc/steady', 'WEBRC baseline on 320 / 160 kbit/s (sim)', 'recorded (the thesis compares visually)'],
  ['an/U1-plainTCP', 'REM and RED bottleneck queue per load region with plain TCP Reno (U1 without ACC, sim)', 'REM 24.7 ± 3 packets per region; drops ≤ 10 %'],
  ['active/OVH-ACC', 'ACC overhead run, Table 4.10 (sim; the spec id does not fit the table parser)', 'active notifications in 50 s: RED-active 12 ± 4, REM-active 39 ± 10; ACC PLR ≥ 5× plain PLR'],
  ['active/S2-b', 'PGMCC vs TCP, Jain at 300 s and 3000 s (sim; the spec row "S2-b (PGMCC, if implemented)" does not fit the table parser)', 'expect degradation (Seada & Helmy 0.94 → 0.74, PGMCC ahead on the long run): the stall/timeout flaw'],
  ['issue4/determinism', 'Same scenario and seed give the same output bit for bit', 'identical'],
  ['issue5/prefix-decode', 'Every prefix of the 9-layer ladder decodes, also with 5% loss on upper layers', 'no decoder error'],
  ['issue5/psnr', 'PSNR per prefix against the scaled source', 'rising with spatial layers, above the documented floor'],
  ['issue5/interop-gst', 'Layer 0 decodes with stock gst-launch rtpvp9depay ! vp9dec', 'decodes'],
  ['issue5/interop-ffmpeg', 'Layer 0 decodes with ffmpeg from the SDP', 'decodes'],
  ['issue5/bench-encode', 'Encode fps 720p30 L3T3, one core', '≥ 60 fps'],
  ['issue5/bench-decode', 'Decode fps 720p L3T3', 'reported'],
  ['issue5/layer-rates', 'Each layer bitrate against its target over 10 s', 'within 10%'],
  ['issue6/pp-accuracy-1M', 'Packet-pair dispersion vs 1 Mbit/s bottleneck', 'within 5%'],
  ['issue6/pp-accuracy-10M', 'Packet-pair dispersion vs 10 Mbit/s bottleneck', 'within 5%'],
  ['issue6/era-settle', 'ERA behind 1 Mbit/s settles on the highest fitting layer; sheds on 500 kbit/s', 'within spec reaction time'],
  ['issue6/plm-settle', 'PLM behind 1 Mbit/s settles on the highest fitting layer; sheds on 500 kbit/s', 'within spec reaction time'],
  ['issue18/era-settle-harness', 'ERA settle-and-shed in the in-process session harness (Publisher -> Link -> Subscriber, virtual time)', 'as issue6/era-settle; deterministic, no root, well under a second'],
  ['issue18/plm-settle-harness', 'PLM settle-and-shed in the in-process session harness', 'as issue6/plm-settle; deterministic, no root, well under a second'],
  ['issue18/fec-harness', 'FEC end to end in the session harness: Publisher repair in free slots, Subscriber repair before media leaves', 'every delivered packet bit-exact; fewer media packets missing than without repair under the same losses'],
  ['issue6/video-bottleneck', 'Headless player behind a bottleneck decodes with no error, PSNR above floor', 'no error, PSNR ≥ floor'],
  ['issue6/stock-gst', 'Stock GStreamer (udpsrc ! rtpvp9depay ! vp9dec) plays layer 0', 'plays, no errors'],
  ['issue6/stock-ffplay', 'ffmpeg/ffplay plays layer 0 from the served SDP', 'plays, no errors'],
  ['issue21/av-offset-short', 'A/V offset at the player (flash and beep), clean path, 24 s (make test)', '|offset| p95 ≤ 20 ms, 0 audio gaps'],
  ['issue21/forged-sender-reports', 'Forged clear RTCP sender reports (mappings 1 s apart) sent to an encrypted session\'s audio and video RTCP ports while a player plays it (make test)', 'every forged report refused and counted, sealed ones taken, |A/V offset| p95 ≤ 20 ms, ≥ 12 flashes in 18 s'],
  ['issue21/av-offset-p95', 'A/V offset at the player (flash and beep), clean path, 60 s', '|offset| p95 ≤ 20 ms'],
  ['issue21/av-offset-p95-switch', 'A/V offset across a layer down- and up-switch', '|offset| p95 ≤ 20 ms'],
  ['issue21/audio-gaps-clean', 'Audio gaps (concealment events, underruns) on a clean path, 60 s', '0'],
  ['issue21/audio-concealment-1pct', 'Audio concealment events at 1 % random loss', '≤ 1 per minute'],
  ['issue21/audio-gaps-switch', 'Audio gaps while the video freezes and switches layers', '0 underruns'],
  ['issue21/natural-clip-av', 'Natural clip with a sound track: audio reaches the player, A/V offset', 'plays; |offset| p95 ≤ 20 ms'],
  ['issue21/interop-ffmpeg-audio', 'ffmpeg plays layer 0 with its Opus audio from the served SDP', 'video and audio decoded'],
  ['issue21/interop-gst-audio', 'gst-launch (sdpdemux) plays layer 0 with its Opus audio from the served SDP', 'video and audio decoded'],
  ['issue6/malformed', 'Malformed packets, announcements and reports are counted and dropped', 'counted, no crash'],
  ['issue6/server-restart', 'Players resume after a server restart', '≤ 2 s'],
  ['issue6/tfmcc-live', 'TFMCC session, receivers behind 1 and 4 Mbit/s tbf: sender rate at the slow share, slow receiver CLR', '0.7-1.3 Mbit/s, CLR ≥ 90%'],
  ['issue6/video-layer-rates', 'Video session: every layer on the wire at its announced rate (media + padding, equal-size packets)', 'within 3%'],
  ['issue6/bench-sender-cpu', 'Sender CPU per 10 Mbit/s paced output', 'reported'],
  ['issue6/bench-bunch-timing', 'Bunch timing error on the wire, p99', '≤ 50 µs'],
  ['issue6/bench-latency', 'Glass-to-glass latency on loopback, p50', '≤ 100 ms'],
  ['issue6/bench-join', 'Join to first frame', '≤ 1.5 s'],
  ['issue6/join-first-packet', 'Join (IGMP report) to first packet, synthetic layers (no decoder)', 'reported'],
  ['issue6/bench-player-cpu', 'Player CPU at 720p L3T3 (% of one core)', 'reported (< 100 % at 30 fps)'],
  ['issue6/player-window', 'Player window under Xvfb shows the video with the stats overlay', 'window exists, non-black'],
  ['issue7/linkemu-timing', 'Link emulator release timing error at 10 Mbit/s', '≤ 50 µs'],
  ['issue7/linkemu-throughput', 'Link emulator sustained throughput per direction, one core', '≥ 100 Mbit/s'],
  ['issue7/linkemu-ping-iperf', 'Delay and rate applied, verified with ping and iperf3', 'as configured'],
  ['issue7/players-synthetic', 'Players one machine carries in the testbed, synthetic layers', '≥ 50'],
  ['issue7/players-video', 'Players one machine carries in the testbed, with video decoding', '≥ 10'],
  ['issue7/leave-latency', 'igmpproxy leave latency (last leave to last packet on the bottleneck)', 'measured and reported'],
  ['issue7/video-quality', 'Scripted quality test: per-player PSNR/SSIM against the reference behind 600 kbit/s and 4 Mbit/s', 'PSNR ≥ 24 dB, picture size follows the bottleneck'],
  ['issue8/browser', 'Dashboard in Chromium: viewer rows appear, layers change with the bottleneck', 'as a person sees it'],
  ['issue8/browser-tfmcc', 'Dashboard in Chromium: a live TFMCC session shows its limiting receiver and rate', 'CLR = narrow-path player'],
  ['issue8/promtool', 'Prometheus config and alert rules: promtool check and unit tests', 'pass'],
  ['issue8/live-prometheus', 'Real Prometheus scraping server and players: every alert and panel query returns data', 'data back'],
  ['issue8/containers', 'Server and player container images build and run with host networking', 'built, player receives'],
  ['issue19/fill-share', 'Repair + padding share of each video layer at the announced rates, natural content (BBB 720p30, default ladder)', '≤ 25 % per layer'],
  ['issue19/padding-share', 'Padding share of each video layer at the announced rates, natural content', '≤ 10 % per layer'],
  ['issue19/headroom', 'Announced rate_headroom and key_headroom of the default video config', '≤ 1.25 on every layer'],
  ['issue19/pacer-wait', 'Time a picture waits in the pacer queues at the announced rates (all layers, in order)', 'reported (the latency cost of the headroom)'],
  ['issue19/fec-recovery', 'Lost media packets FEC recovers at the announced rates, 2 % random loss', 'reported'],
  ['issue19/bd-rate', 'Layered vs one plain VP9 realtime stream at the same rate, BD-rate (PSNR, SSIM) per ladder point', '≤ 30 % at every point'],
  ['issue19/encode-fec-speed', 'Encode 720p30 (the default encode, L3T2; issue 19 named L3T3, docs/codec.md has both) + RTP + FEC on one core', '≥ 1.2x real time'],
  ['issue19/testbed-ladder', 'Testbed, natural clip, the server\'s default encode (1280x720 at 30 fps): viewers behind 350 kbit/s, 1 Mbit/s and 3 Mbit/s drop-tail links; after the first 10 s', '≥ 90 % of the pictures at least 320x180, 640x360, 1280x720 respectively, at ≥ 15 fps shown (0.97 × 15: every picture of a 15-fps layer)'],
  ['issue19/layer-overshoot', 'Each cell\'s rate against its budget on natural content (BBB, default rate control)', 'reported per cell'],
  ['issue20/lcc-clean', 'Quality suite, LCC (the default controller), natural clip, 60 s, mean ± 95 % CI over the runs: clean path that carries every layer (4 Mbit/s)', '0 freezes; shown fps ≥ 0.97 × source at the held layer; glass-to-glass p95 ≤ 200 ms, p50 ≤ 100 ms'],
  ['issue20/lcc-middle', 'Quality suite, LCC (the default controller), natural clip, 60 s, mean ± 95 % CI over the runs: clean path that carries a middle layer (1 Mbit/s)', '0 freezes; shown fps ≥ 0.97 × source at the held layer'],
  ['issue20/lcc-loss1', 'Quality suite, LCC (the default controller), natural clip, 60 s, mean ± 95 % CI over the runs: 1 % random loss on the access link', '≤ 1 freeze per minute; PSNR within 1 dB of lossless'],
  ['issue20/lcc-loss5', 'Quality suite, LCC (the default controller), natural clip, 60 s, mean ± 95 % CI over the runs: 5 % random loss on the access link', '≤ 4 freezes per minute, none longer than 1 s'],
  ['issue20/lcc-jitter20', 'Quality suite, LCC (the default controller), natural clip, 60 s, mean ± 95 % CI over the runs: 20 ms of jitter on the access link', '0 freezes'],
  ['issue20/lcc-cubic', 'Quality suite, LCC (the default controller), natural clip, 60 s, mean ± 95 % CI over the runs: access link shared with one CUBIC bulk download', '≤ 2 freezes per minute'],
  ['issue20/era-clean', 'Quality suite, ERA, natural clip, 60 s, mean ± 95 % CI over the runs: clean path that carries every layer (4 Mbit/s)', '0 freezes; shown fps ≥ 0.97 × source at the held layer; glass-to-glass p95 ≤ 200 ms, p50 ≤ 100 ms'],
  ['issue20/era-middle', 'Quality suite, ERA, natural clip, 60 s, mean ± 95 % CI over the runs: clean path that carries a middle layer (1 Mbit/s)', '0 freezes; shown fps ≥ 0.97 × source at the held layer'],
  ['issue20/era-loss1', 'Quality suite, ERA, natural clip, 60 s, mean ± 95 % CI over the runs: 1 % random loss on the access link', '≤ 1 freeze per minute; PSNR within 1 dB of lossless'],
  ['issue20/era-loss5', 'Quality suite, ERA, natural clip, 60 s, mean ± 95 % CI over the runs: 5 % random loss on the access link', '≤ 4 freezes per minute, none longer than 1 s'],
  ['issue20/era-jitter20', 'Quality suite, ERA, natural clip, 60 s, mean ± 95 % CI over the runs: 20 ms of jitter on the access link', '0 freezes'],
  ['issue20/era-cubic', 'Quality suite, ERA, natural clip, 60 s, mean ± 95 % CI over the runs: access link shared with one CUBIC bulk download', '≤ 2 freezes per minute'],
  ['issue20/plm-clean', 'Quality suite, PLM, natural clip, 60 s, mean ± 95 % CI over the runs: clean path that carries every layer (4 Mbit/s)', '0 freezes; shown fps ≥ 0.97 × source at the held layer; glass-to-glass p95 ≤ 200 ms, p50 ≤ 100 ms'],
  ['issue20/plm-middle', 'Quality suite, PLM, natural clip, 60 s, mean ± 95 % CI over the runs: clean path that carries a middle layer (1 Mbit/s)', '0 freezes; shown fps ≥ 0.97 × source at the held layer'],
  ['issue20/plm-loss1', 'Quality suite, PLM, natural clip, 60 s, mean ± 95 % CI over the runs: 1 % random loss on the access link', '≤ 1 freeze per minute; PSNR within 1 dB of lossless'],
  ['issue20/plm-loss5', 'Quality suite, PLM, natural clip, 60 s, mean ± 95 % CI over the runs: 5 % random loss on the access link', '≤ 4 freezes per minute, none longer than 1 s'],
  ['issue20/plm-jitter20', 'Quality suite, PLM, natural clip, 60 s, mean ± 95 % CI over the runs: 20 ms of jitter on the access link', '0 freezes'],
  ['issue20/plm-cubic', 'Quality suite, PLM, natural clip, 60 s, mean ± 95 % CI over the runs: access link shared with one CUBIC bulk download', '≤ 2 freezes per minute'],
  ['issue20/fast-clean-loss1', 'make test quality test (20 s, ERA, natural clip, 640x360 L3T2 at 30 fps): clean 4 Mbit/s viewer and one with 1 % loss; what each viewer sees', 'clean: 0 freezes, shown fps ≥ 0.97 × source, glass-to-glass p50 ≤ 100 ms and p95 ≤ 200 ms; 1 % loss: ≤ 1 freeze per minute, PSNR within 1 dB of the clean viewer\'s, glass-to-glass p95 ≤ 500 ms (a floor); docs/testbed.md "Bounds of the fast quality test"'],
  ['issue9/fuzz-corpus', 'Fuzz corpora replay clean', 'no crash'],
  ['issue9/soak', '30-minute soak with 20 players', 'memory growth < 5%, no player stuck low'],
  ['issue9/fault-sender-restart', 'Sender killed and restarted: players decode video again', '≤ 2 s after the restart'],
  ['issue9/fault-player-kill', 'A player killed with SIGKILL: others unaffected, server marks it gone', 'others within noise; gone within the viewer timeout'],
  ['issue9/fault-link-flap', '5-second link flap: players shed and recover', 'recover; time measured'],
  ['issue9/fault-loss-burst', '20% loss bursts: players shed, recover after, no stuck state', 'recover to the path level'],
  ['issue9/fault-router-restart', 'Multicast router restarted: players get packets again', 'packets resume; gap measured'],
  ['issue9/hostile-netns', 'Secured session: forged/unsigned/replayed/garbage SAMs refused, wrong-source data filtered (SSM), spoofed data dropped by AEAD, no token or wrong pin gets nothing', 'all refused and counted'],
  ['issue9/hostile-http', 'Tokens (401/403, nothing changed), malformed HTTP 4xx, telemetry flood rate-limited and counted, signed SAMs verify', 'as stated'],
  ['issue9/seal-cost', 'Sender: media sealing per packet', 'reported'],
  ['issue9/open-cost', 'Player: media opening per packet', 'reported'],
  ['issue9/tfmcc-forged-feedback', 'TFMCC with authenticated reports: forged (no MAC, guessed MAC), replayed and flooded reports from a LAN attacker; sender rate vs the honest path, drops counted (unauthenticated control session must fall)', 'rate ≥ 80% of ceiling, all forged counted, control < 50%'],
  ['issue25/pim-fast', 'FRR PIM (2 routers, SSM): two ERA players at different levels, IGMPv3 INCLUDE joins of exactly their layers, PIM joins upstream, everything cleaned up', 'levels 4 and 2 held; state as stated'],
  ['issue25/join-1hop', 'Join → first packet through 1 FRR PIM router (SSM, IGMPv3)', '≤ 50 ms median (plm.md E0)'],
  ['issue25/join-2hop', 'Join → first packet through 2 FRR PIM routers (SSM, IGMPv3)', '≤ 50 ms median (plm.md E0)'],
  ['issue25/leave-1hop', 'Leave → last packet on the bottleneck through 1 FRR PIM router (deploy/router/frr/frr.conf timers)', '≤ 200 ms max (era.md AC-14)'],
  ['issue25/leave-2hop', 'Leave → last packet on the bottleneck through 2 FRR PIM routers (IGMP leave + PIM prune)', '≤ 200 ms max (era.md AC-14)'],
  ['issue25/era-settle', 'ERA 2 PIM routers from the sender: reach and hold 4 layers at 1 Mbit/s, shed to 2 after the step to 500 kbit/s', 'reach, hold, shed ≤ 1 s (era.md AC-3)'],
  ['issue25/plm-settle', 'PLM 2 PIM routers from the sender: reach and hold 4 layers at 1 Mbit/s, shed to 2 after the step to 500 kbit/s', 'reach, hold, shed ≤ 1 s (one C)'],
  ['issue25/era-settle-frr-defaults', "ERA settle-and-shed with FRR's default IGMP timers (leave 2 × 1 s)", 'reported'],
  ['issue25/plm-settle-frr-defaults', "PLM settle-and-shed with FRR's default IGMP timers (leave 2 × 1 s)", 'reported'],
  ['issue25/sender-rate', 'Sender multicast output with 1, 4 and 16 viewers spread over 3 FRR routers', 'flat within 2 %'],
  ['issue25/lcc-settle', 'LCC (product default) 2 PIM routers from the sender: reach and hold 4 layers at 1 Mbit/s, shed to 2 after the step to 500 kbit/s', 'reach, hold, shed ≤ 1 s'],
  ['issue25/lcc-settle-frr-defaults', "LCC settle-and-shed with FRR's default IGMP timers (leave 2 × 1 s)", 'reported'],
  ['issue25/edges-play', 'WebRTC edges behind 3 FRR routers (1 then 3 edges, 2 then 4 headless Chromium browsers on clean paths): every browser plays', '≥ 27 fps decoded (source 30), no freeze'],
  ['issue25/edges-path', 'The routed path to the edges: every RTP stream at each edge\'s multicast input against the sender\'s output (packet captures), and the routers\' kernel counters', '0 lost, 0 reordered, no pause > the sender\'s + 50 ms, 0 wrong-interface packets'],
  ['issue25/edges-ssm-join', 'Each edge one subscription: every session group joined once, source-specifically (IGMPv3 INCLUDE {sender}), and (S,G) with no (*,G) on its router', 'all groups (S,G), 1 socket each'],
  ['issue25/edges-sender-rate', 'Sender multicast output with 1 edge (2 browsers) and 3 edges (4 browsers), same encode', 'flat within 2 %'],
  ['issue22/browser-fps', 'Headless Chromium behind 4 Mbit/s plays the session from the edge\'s watch page: framesDecoded rate (getStats)', '≥ 27 fps (source 30)'],
  ['issue22/browser-top-layer', 'Same browser: frameWidth (getStats)', 'top spatial layer'],
  ['issue22/browser-no-freeze', 'Same browser, clean path: freezes (getStats freezeCount)', '0'],
  ['issue22/browser-audio', 'Same browser: audio packets received (getStats)', '> 0 once the session has audio'],
  ['issue22/browser-on-dashboard', 'The browser appears in the server\'s /api/viewers (edge telemetry)', 'present, protocol webrtc'],
  ['issue22/clean-layer-stability', 'Both browsers, 20 s on clean paths (4 Mbit/s and 600 kbit/s) after a 5-s start-up: spatial layer changes (estimate range and start-up changes reported)', '0'],
  ['issue22/narrow-lower-spatial', 'Second browser behind 600 kbit/s', 'lower spatial layer than the 4 Mbit/s one'],
  ['issue22/step-drop', 'Browser path steps 4 → 1 Mbit/s: the edge drops layers', '≤ 5 s'],
  ['issue22/step-no-freeze', 'During the step down and back: freezes over 500 ms', '0'],
  ['issue22/step-restore', 'Browser path steps back 1 → 4 Mbit/s: layers restored', '≤ 15 s'],
  ['issue22/loss2-freezes', '2 % random loss on a browser path: NACK/RTX repair, freezes (getStats)', '≤ 1 per minute'],
  ['issue22/browser-no-jump-back', 'Both browsers over the whole suite (noisy clip: every picture differs): pictures shown equal to one before the previous picture (hashed at 160x90 in the page), with the encoder fillers the edge left out', '0'],
  ['issue22/bench-viewers', 'Viewers one edge core serves at ~1 Mbit/s each (str0m load client)', '≥ 200'],
  ['issue22/bench-latency', 'Edge-added latency (frame\'s last packet into the edge → received by the client), p50', '≤ 20 ms'],
  ['issue22/fuzz-offer-corpus', 'WHEP offer fuzz corpus replayed (cargo test)', 'no crash'],
  ['issue23/audience-10k-udp', '10,000 synthetic viewers reporting over UDP + 50 dashboard clients on loopback (make bench-control)', 'control plane < 25 % of one core, RSS < 300 MB, dashboard update p99 ≤ 1.5 s'],
  ['issue23/https-1000', '1,000 HTTPS clients connecting at once to a server on its safe defaults (make bench-control)', 'all served, handshake p99 ≤ 1 s'],
  ['issue23/fuzz-server-corpus', 'Server fuzz corpora (telemetry JSON, UDP reports, config file) replayed (cargo test)', 'no finding'],
  ['issue23/key-rotation', 'Token key and media key rotated on a running server on its safe defaults (cargo test --test security keys_rotate)', 'old credentials work during the overlap and fail after; keys fetched during the lead open every packet'],
  ['issue23/fault-dup-reorder', 'Duplication + reordering in the link emulator on a secured session (netns_security duplicated)', 'duplicates counted, nothing fails to open, back at the level after'],
  ['issue23/fault-stalled-source', 'A video source that stalls, on a server on its safe defaults (security stalled_source)', 'stall counted, pictures flat, packets keep flowing, API answers, pictures resume'],
  ['issue23/fault-sender-restart-secured', 'Sender killed and restarted, on the secured configuration (tokens, HTTPS, encryption, UDP reports with MAC, SSM; make faults)', 'decode again ≤ 2 s after the restart'],
  ['issue23/fault-player-kill-secured', 'A player killed with SIGKILL, on the secured configuration (make faults)', 'others within noise; gone within the viewer timeout + 2 s'],
  ['issue23/fault-link-flap-secured', '5-second link flap, on the secured configuration (make faults)', 'back at the level ≤ 30 s; control player undisturbed'],
  ['issue23/fault-loss-burst-secured', '20% loss bursts, on the secured configuration (make faults)', 'shed, recover ≤ 30 s after each, no stuck state'],
  ['issue23/fault-router-restart-secured', 'Multicast router restarted, on the secured configuration (SSM joins; make faults)', 'packets ≤ 10 s, level ≤ 30 s after the restart'],
  ['issue23/fault-clock-step', "The server's wall clock stepped +5/-5/-5/+5 s (its own, not the host's) on the secured configuration (make faults ARGS=clock-step)", 'no blackout: packet gap ≤ 0.5 s, picture gap ≤ 1 s, level held; reports accepted in every phase; API answers'],
  ['issue23/media-key-rotation-player', 'Three media key rotations under a playing player (netns_security media_key)', '0 packets fail to open'],
];

function parseSpecChecks() {
  const checks = [];
  if (!fs.existsSync(specsDir)) return checks;
  for (const file of fs.readdirSync(specsDir).sort()) {
    const prefix = SPEC_PREFIX[file];
    if (!prefix) continue;
    const lines = fs.readFileSync(path.join(specsDir, file), 'utf8').split('\n');
    let inAcceptance = false;
    let header = null;
    for (const line of lines) {
      const h = line.match(/^(#+)\s+(.*)/);
      if (h) {
        if (h[1].length <= 2) inAcceptance = /acceptance/i.test(h[2]);
        else if (/acceptance/i.test(h[2])) inAcceptance = true;
        header = null;
        continue;
      }
      if (!inAcceptance || !line.startsWith('|')) { if (!line.startsWith('|')) header = null; continue; }
      const cells = line.split('|').slice(1, -1).map((c) => c.trim());
      if (cells.every((c) => /^:?-+:?$/.test(c))) continue;
      if (!header) { header = cells.map((c) => c.toLowerCase()); continue; }
      const id = cells[0].replace(/\*/g, '');
      if (!/^[A-Z][A-Za-z]*-?\d+[a-z]?(-[a-z])?$/.test(id)) continue;
      let passCol = header.findIndex((c) => /pass|target/.test(c));
      if (passCol < 0) passCol = cells.length - 1;
      const what = cells[1] || '';
      checks.push({ id: `${prefix}/${id}`, what, target: cells[passCol] || '' });
    }
  }
  return checks;
}

function readResults() {
  const out = new Map();
  if (!fs.existsSync(resultsDir)) return out;
  for (const f of fs.readdirSync(resultsDir)) {
    if (!f.endsWith('.json')) continue;
    try {
      const r = JSON.parse(fs.readFileSync(path.join(resultsDir, f), 'utf8'));
      if (r && typeof r.id === 'string') {
        const prev = out.get(r.id);
        if (!prev || String(r.at) > String(prev.at)) out.set(r.id, r);
      }
    } catch (e) {
      console.error(`acceptance: ignoring unreadable ${f}: ${e.message}`);
    }
  }
  return out;
}

function readPrevious() {
  const prev = new Map();
  if (!fs.existsSync(outFile)) return prev;
  for (const line of fs.readFileSync(outFile, 'utf8').split('\n')) {
    const m = line.match(/^\| `([^`]+)` \|/);
    if (!m) continue;
    // Split on the table's pipes only: values keep theirs escaped as `\|` (esc below).
    const cells = line.split(/(?<!\\)\|/).slice(1, -1).map((c) => c.trim());
    if (cells.length >= 7) {
      prev.set(m[1], { what: cells[1], target: cells[2], value: cells[3], verdict: cells[4], command: cells[5].replace(/^`|`$/g, ''), at: cells[6], measured: cells[3] !== '—' });
    }
  }
  return prev;
}

const esc = (s) => String(s).replace(/\|/g, '\\|').replace(/\n/g, ' ');
const verdictOf = (p) => (p === true ? 'pass' : p === false ? '**fail**' : 'reported');

const results = readResults();
const previous = readPrevious();
let specChecks = parseSpecChecks();
if (specChecks.length === 0) {
  // Without the specs (a checkout that is not next to shared/), keep the spec rows the table
  // already has rather than dropping them; say so, since their wording may be stale.
  const prefixes = Object.values(SPEC_PREFIX).map((p) => `${p}/`);
  const issueIds = new Set(ISSUE_CHECKS.map(([id]) => id));
  specChecks = [...previous.entries()]
    .filter(([id]) => prefixes.some((p) => id.startsWith(p)) && !issueIds.has(id) && !/@(testbed|harness)$/.test(id))
    .map(([id, r]) => ({ id, what: r.what.replace(/\\\|/g, '|'), target: r.target.replace(/\\\|/g, '|') }));
  console.error(`acceptance: no specs in ${specsDir} (set LAYERCAST_SPECS_DIR); keeping the ${specChecks.length} spec rows of the previous table`);
}
const checks = [...specChecks, ...ISSUE_CHECKS.map(([id, what, target]) => ({ id, what, target }))];
// A check measured in more than one setting gets one row per setting, right after the base
// row: the testbed records `<id>@testbed` (e2e/src/full.ts SIM_ALSO), a protocol-crate harness
// that runs a narrower version of a simulator experiment records `<id>@harness`, so that the two
// never overwrite each other's latest value.
{
  const base = new Set(checks.map((c) => c.id));
  const tagged = (id) => /^(.+)@(testbed|harness)$/.exec(id);
  const extra = [...new Set([...results.keys(), ...previous.keys()])].filter((id) => {
    const m = tagged(id);
    return m !== null && base.has(m[1]);
  });
  for (const id of extra.sort().reverse()) {
    const [, b, tag] = tagged(id);
    const i = checks.findIndex((c) => c.id === b);
    checks.splice(i + 1, 0, { ...checks[i], id, what: `${checks[i].what} (${tag})` });
  }
}
const known = new Set(checks.map((c) => c.id));
for (const id of results.keys()) if (!known.has(id)) console.error(`acceptance: result for unknown check ${id}`);

let nPass = 0, nFail = 0, nOpen = 0;
const rows = checks.map((c) => {
  const r = results.get(c.id);
  let value = '—', verdict = 'not measured yet', command = '', at = '';
  if (r) {
    value = esc(r.value); verdict = verdictOf(r.pass); command = esc(r.command || ''); at = String(r.at || '').slice(0, 10);
  } else if (previous.has(c.id) && previous.get(c.id).measured) {
    ({ value, verdict, command, at } = previous.get(c.id));
  }
  if (verdict === 'pass') nPass++; else if (verdict.includes('fail')) nFail++; else if (verdict === 'not measured yet') nOpen++;
  return `| \`${c.id}\` | ${esc(c.what).slice(0, 160)} | ${esc(c.target).slice(0, 200)} | ${value} | ${verdict} | ${command ? '`' + command + '`' : ''} | ${at} |`;
});

const text = `# Acceptance checks

Generated by \`node scripts/acceptance.mjs\` (run by \`make test\` and \`make acceptance\`) from the
acceptance tables of the specs and the issues' targets, merged with the measurements that tests and
benchmarks record in \`target/acceptance/\`. Do not edit numbers here by hand: re-run the command.

${nPass} pass, ${nFail} fail, ${checks.length - nPass - nFail - nOpen} reported without a bar, ${nOpen} not measured yet (of ${checks.length}).

| check | what | target | latest value | verdict | command | date |
|---|---|---|---|---|---|---|
${rows.join('\n')}
`;
fs.mkdirSync(path.dirname(outFile), { recursive: true });
fs.writeFileSync(outFile, text);
console.log(`acceptance: ${checks.length} checks, ${nPass} pass, ${nFail} fail, ${nOpen} not measured yet -> docs/acceptance.md`);
