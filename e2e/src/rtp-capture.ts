// RTP streams as the wire carried them at one interface: tcpdump writes the session's
// multicast packets into a pcap file, and the file is read back per (group, SSRC) stream for
// sequence gaps, reordering and the longest silence. Taken at the sender's interface and at
// each edge's upstream interface, the difference is what the routed network lost or held
// back, independent of what the edge's own counters say.
import fs from 'node:fs';
import type { ChildProcess } from 'node:child_process';
import { waitExit, type ProcessSet } from './sh.js';

export interface RtpStream {
  group: string;
  ssrc: number;
  packets: number;
  /** Sequence numbers never seen between the first and the last (16-bit wrap followed). */
  missing: number;
  /** Packets that arrived with a lower sequence number than one already seen. */
  reordered: number;
  /** The longest time between two consecutive packets of the stream, ms. */
  maxGapMs: number;
  /** The sequence numbers seen, extended past the 16-bit wrap from the first packet's, ascending. */
  seqs: number[];
}

/** A running capture; `stop` ends tcpdump and returns the streams it saw. */
export interface Capture {
  stop(): Promise<RtpStream[]>;
}

/** Starts tcpdump in `ns` on `ifName` for UDP to the groups under `prefix` (a /24, "a.b.c."). */
export async function startCapture(procs: ProcessSet, ns: string, ifName: string, prefix: string, file: string): Promise<Capture> {
  const net = `${prefix}0/24`;
  const child: ChildProcess = procs.spawnIn(ns, `tcpdump ${ns} ${ifName}`, 'tcpdump', ['-i', ifName, '-n', '-U', '-s', '96', '-w', file, 'udp', 'and', 'dst', 'net', net]);
  let said = '';
  child.stderr?.on('data', (d) => (said += String(d)));
  // tcpdump says "listening on ..." once its socket is open; packets before that are not seen.
  const end = Date.now() + 5000;
  while (!/listening on/.test(said)) {
    if (child.exitCode !== null) throw new Error(`tcpdump in ${ns} on ${ifName} exited ${child.exitCode}: ${said}`);
    if (Date.now() > end) throw new Error(`tcpdump in ${ns} on ${ifName}: not listening after 5 s: ${said}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  return {
    async stop() {
      child.kill('SIGINT');
      if ((await waitExit(child, 3000)) === null) child.kill('SIGKILL');
      return rtpStreams(fs.readFileSync(file));
    },
  };
}

/** Packets of `sent` that `got` lacks, counted within the span `got` was listening for (its
 *  first to its last packet of the stream), so that the two captures' ends do not count. */
export function lostBetween(sent: RtpStream, got: RtpStream): number {
  if (!got.seqs.length) return 0;
  const [lo, hi] = [got.seqs[0], got.seqs[got.seqs.length - 1]];
  const have = new Set(got.seqs);
  return sent.seqs.filter((q) => q >= lo && q <= hi && !have.has(q)).length;
}

/** Reads a pcap (Ethernet or Linux cooked v1 link type, microsecond or nanosecond stamps) and
 *  summarises its RTP streams; packets that are not IPv4/UDP/RTP v2 are skipped. */
export function rtpStreams(pcap: Buffer): RtpStream[] {
  if (pcap.length < 24) return [];
  const magic = pcap.readUInt32LE(0);
  const le = magic === 0xa1b2c3d4 || magic === 0xa1b23c4d;
  const nano = magic === 0xa1b23c4d || magic === 0x4d3cb2a1;
  if (!le && magic !== 0xd4c3b2a1 && magic !== 0x4d3cb2a1) throw new Error('not a pcap file');
  const u32 = (o: number) => (le ? pcap.readUInt32LE(o) : pcap.readUInt32BE(o));
  const linkType = u32(20);
  const l2 = linkType === 1 ? 14 : linkType === 113 ? 16 : -1;
  if (l2 < 0) throw new Error(`pcap link type ${linkType} not read here`);
  type S = Omit<RtpStream, 'seqs'> & { lastAt: number; seen: Set<number>; lo: number; hi: number };
  const streams = new Map<string, S>();
  for (let o = 24; o + 16 <= pcap.length; ) {
    const at = u32(o) * 1000 + u32(o + 4) / (nano ? 1e6 : 1e3);
    const cap = u32(o + 8);
    const p = o + 16;
    o = p + cap;
    if (o > pcap.length) break;
    const ip = p + l2;
    if (cap < l2 + 20 || pcap[ip] >> 4 !== 4 || pcap[ip + 9] !== 17) continue;
    const ihl = (pcap[ip] & 15) * 4;
    const rtp = ip + ihl + 8;
    // RTCP shares the ports in places (RFC 5761: its packet types 192-223 in the second byte).
    if (rtp + 12 > p + cap || pcap[rtp] >> 6 !== 2 || (pcap[rtp + 1] >= 192 && pcap[rtp + 1] <= 223)) continue;
    const group = [...pcap.subarray(ip + 16, ip + 20)].join('.');
    const seq = pcap.readUInt16BE(rtp + 2);
    const ssrc = pcap.readUInt32BE(rtp + 8);
    const key = `${group}/${ssrc}`;
    let s = streams.get(key);
    if (!s) {
      s = { group, ssrc, packets: 0, missing: 0, reordered: 0, maxGapMs: 0, lastAt: at, seen: new Set(), lo: seq, hi: seq };
      streams.set(key, s);
    }
    // Extend the 16-bit number to the one nearest the highest seen.
    let ext = (s.hi & ~0xffff) | seq;
    if (ext - s.hi > 0x8000) ext -= 0x10000;
    else if (s.hi - ext > 0x8000) ext += 0x10000;
    if (ext < s.hi) s.reordered++;
    s.seen.add(ext);
    s.lo = Math.min(s.lo, ext);
    s.hi = Math.max(s.hi, ext);
    s.packets++;
    s.maxGapMs = Math.max(s.maxGapMs, at - s.lastAt);
    s.lastAt = at;
  }
  return [...streams.values()]
    .map((s) => ({ group: s.group, ssrc: s.ssrc, packets: s.packets, missing: s.hi - s.lo + 1 - s.seen.size, reordered: s.reordered, maxGapMs: s.maxGapMs, seqs: [...s.seen].sort((a, b) => a - b) }))
    .sort((a, b) => (a.group === b.group ? a.ssrc - b.ssrc : a.group.localeCompare(b.group, 'en', { numeric: true })));
}
