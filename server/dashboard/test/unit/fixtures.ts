import type { Session, Snapshot, Viewer } from "../../src/types";

export function session(over: Partial<Session> = {}): Session {
  return {
    id: "s1",
    name: "main",
    protocol: "era",
    source: "synthetic",
    codec: "",
    layers: [0, 1, 2].map((k) => ({
      index: k,
      rate_bps: 100_000 * 2 ** k,
      cumulative_bps: 100_000 * (2 ** (k + 1) - 1),
      group: `239.1.1.${k + 1}`,
      port: 5000 + 2 * k,
      label: `L${k}`,
    })),
    viewers_by_layer: [],
    tfmcc: null,
    started_at: 1000,
    packets_sent: 0,
    bytes_sent: 0,
    ...over,
  };
}

export function viewer(id: string, over: Partial<Viewer> = {}): Viewer {
  return {
    id,
    session_id: "s1",
    addr: "10.0.0.1:40000",
    protocol: "era",
    layers: 1,
    max_layers: 3,
    rate_bps: 100_000,
    estimate_bps: 150_000,
    loss_ratio: 0,
    width: 320,
    height: 180,
    fps: 15,
    frames: 10,
    freezes: 0,
    audio_packets: 0,
    audio_lost: 0,
    audio_concealed: 0,
    rtt_s: null,
    decisions: [],
    last_seen_s: 1000,
    gone: false,
    ...over,
  };
}

export function snap(t: number, sessions: Session[], viewers: Viewer[]): Snapshot {
  return { type: "snapshot", t, sessions, viewers };
}
