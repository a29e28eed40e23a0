// The pcap reader of src/rtp-capture.ts on hand-built captures: sequence gaps across the 16-bit
// wrap, reordering, the longest pause, one stream per (group, SSRC), and what is not RTP
// skipped. Pure, no packets on a network; milliseconds.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { lostBetween, rtpStreams } from '../src/rtp-capture.js';

type Pkt = { ms: number; group: string; seq: number; ssrc: number; version?: number; proto?: number };

/** A little-endian microsecond pcap of Ethernet frames, IPv4/UDP with a 12-byte RTP header. */
function pcap(pkts: Pkt[], linkType = 1): Buffer {
  const head = Buffer.alloc(24);
  head.writeUInt32LE(0xa1b2c3d4, 0);
  head.writeUInt16LE(2, 4);
  head.writeUInt16LE(4, 6);
  head.writeUInt32LE(65535, 16);
  head.writeUInt32LE(linkType, 20);
  const recs = pkts.map((p) => {
    const frame = Buffer.alloc(14 + 20 + 8 + 12 + 4);
    frame.writeUInt16BE(0x0800, 12);
    const ip = 14;
    frame[ip] = 0x45;
    frame[ip + 9] = p.proto ?? 17;
    p.group.split('.').forEach((x, i) => (frame[ip + 16 + i] = Number(x)));
    const rtp = ip + 20 + 8;
    frame[rtp] = (p.version ?? 2) << 6;
    frame.writeUInt16BE(p.seq, rtp + 2);
    // A seq of 0xc8NN stands for an RTCP sender report (packet type 200 in the second byte).
    if (p.seq >> 8 === 0xc8) frame[rtp + 1] = 200;
    frame.writeUInt32BE(p.ssrc, rtp + 8);
    const rec = Buffer.alloc(16);
    rec.writeUInt32LE(Math.floor(p.ms / 1000), 0);
    rec.writeUInt32LE(Math.round((p.ms % 1000) * 1000), 4);
    rec.writeUInt32LE(frame.length, 8);
    rec.writeUInt32LE(frame.length, 12);
    return Buffer.concat([rec, frame]);
  });
  return Buffer.concat([head, ...recs]);
}

test('gaps across the sequence wrap, reordering and the longest pause, per stream', () => {
  const g0 = '232.255.100.0';
  const g1 = '232.255.100.1';
  const s = rtpStreams(
    pcap([
      { ms: 1000, group: g0, seq: 65533, ssrc: 7 },
      { ms: 1010, group: g0, seq: 65535, ssrc: 7 }, // 65534 missing
      { ms: 1020, group: g0, seq: 0, ssrc: 7 },
      { ms: 1030, group: g0, seq: 2, ssrc: 7 },
      { ms: 1040, group: g0, seq: 1, ssrc: 7 }, // late: reordered, not missing
      { ms: 1300, group: g0, seq: 3, ssrc: 7 }, // a 260-ms pause
      { ms: 1005, group: g1, seq: 10, ssrc: 8 },
      { ms: 1015, group: g1, seq: 11, ssrc: 8 },
      { ms: 1016, group: g1, seq: 12, ssrc: 9 }, // another SSRC on the same group: its own stream
      { ms: 1017, group: g1, seq: 99, ssrc: 8, version: 1 }, // not RTP v2
      { ms: 1018, group: g1, seq: 50, ssrc: 8, proto: 6 }, // not UDP
      { ms: 1019, group: g1, seq: 0xc800, ssrc: 8 }, // RTCP (second byte 200): see pcap()
    ]),
  );
  assert.deepEqual(
    s.map((x) => [x.group, x.ssrc, x.packets, x.missing, x.reordered, Math.round(x.maxGapMs)]),
    [
      [g0, 7, 6, 1, 1, 260],
      [g1, 8, 2, 0, 0, 10],
      [g1, 9, 1, 0, 0, 0],
    ],
  );
});

test('an empty capture has no streams; another link type is refused', () => {
  assert.deepEqual(rtpStreams(pcap([])), []);
  assert.throws(() => rtpStreams(pcap([], 228)), /link type 228/);
  assert.throws(() => rtpStreams(Buffer.alloc(24)), /not a pcap/);
});

test('lost between two captures: only within the span the receiver listened', () => {
  const at = (seqs: number[]) => pcap(seqs.map((seq, i) => ({ ms: i * 10, group: '232.1.1.1', seq, ssrc: 1 })));
  const [sent] = rtpStreams(at([1, 2, 3, 4, 5, 6, 7, 8]));
  const [got] = rtpStreams(at([3, 4, 6, 7])); // started late, stopped early, lost 5
  assert.equal(lostBetween(sent, got), 1);
  assert.equal(got.missing, 1);
});
