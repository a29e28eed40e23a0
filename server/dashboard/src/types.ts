// Types of the server's HTTP/WebSocket contract (/api/sessions, /api/viewers, /api/live).
// Field names follow the contract exactly (snake_case); see docs/dashboard.md.

export type Protocol = "lcc" | "era" | "plm" | "rlm" | "rlc" | "flid" | "webrc" | "delay" | "tfmcc";

export interface Layer {
  index: number;
  rate_bps: number;
  cumulative_bps: number;
  group: string;
  port: number;
  label: string;
}

export interface TfmccInfo {
  rate_bps: number;
  /** Current limiting receiver (viewer id) or null when none is known yet. */
  clr: string | null;
  reports_per_round: number;
}

export interface Session {
  id: string;
  name: string;
  protocol: string;
  source: string;
  codec: string;
  layers: Layer[];
  /** Index k: number of viewers holding exactly k+1 layers. */
  viewers_by_layer: number[];
  tfmcc: TfmccInfo | null;
  started_at: number;
  packets_sent: number;
  bytes_sent: number;
}

export interface Decision {
  at_s: number;
  from: number;
  to: number;
  reason: string;
  inputs: Record<string, number>;
}

export interface Viewer {
  id: string;
  session_id: string;
  addr: string;
  protocol: string;
  layers: number;
  max_layers: number;
  rate_bps: number;
  estimate_bps: number | null;
  loss_ratio: number;
  width: number;
  height: number;
  fps: number;
  frames: number;
  freezes: number;
  /** Issue 21: audio packets received, lost, and 20-ms frames concealed (totals). */
  audio_packets: number;
  audio_lost: number;
  audio_concealed: number;
  rtt_s: number | null;
  decisions: Decision[];
  last_seen_s: number;
  gone: boolean;
}

export interface Snapshot {
  type: "snapshot";
  t: number;
  sessions: Session[];
  /** A full snapshot lists every viewer; a delta (`full: false`) only those that reported
   *  since the previous message, with the decisions reported since, plus the ids removed. */
  viewers: Viewer[];
  full?: boolean;
  removed?: string[];
}
