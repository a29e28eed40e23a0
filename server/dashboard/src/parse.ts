// Defensive parsing of server JSON. The dashboard must never crash on a malformed or newer
// server message: bad entries are dropped and counted, unknown fields are ignored, missing
// optional fields get neutral defaults.
import type { Decision, Layer, Session, Snapshot, TfmccInfo, Viewer } from "./types";

type Obj = Record<string, unknown>;

function isObj(v: unknown): v is Obj {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
function num(v: unknown, dflt = 0): number {
  return typeof v === "number" && Number.isFinite(v) ? v : dflt;
}
function numOrNull(v: unknown): number | null {
  return typeof v === "number" && Number.isFinite(v) ? v : null;
}
function str(v: unknown, dflt = ""): string {
  return typeof v === "string" ? v : dflt;
}

export class ParseError extends Error {}

export interface ParseStats {
  droppedSessions: number;
  droppedViewers: number;
}

function parseLayer(v: unknown, i: number): Layer | null {
  if (!isObj(v)) return null;
  return {
    index: num(v.index, i),
    rate_bps: num(v.rate_bps),
    cumulative_bps: num(v.cumulative_bps),
    group: str(v.group),
    port: num(v.port),
    label: str(v.label),
  };
}

function parseTfmcc(v: unknown): TfmccInfo | null {
  if (!isObj(v)) return null;
  return {
    rate_bps: num(v.rate_bps),
    clr: typeof v.clr === "string" ? v.clr : null,
    reports_per_round: num(v.reports_per_round),
  };
}

export function parseSession(v: unknown): Session | null {
  if (!isObj(v) || typeof v.id !== "string") return null;
  const layers = Array.isArray(v.layers)
    ? v.layers.map(parseLayer).filter((l): l is Layer => l !== null)
    : [];
  return {
    id: v.id,
    name: str(v.name, v.id),
    protocol: str(v.protocol, "?"),
    source: str(v.source),
    codec: str(v.codec),
    layers,
    viewers_by_layer: Array.isArray(v.viewers_by_layer) ? v.viewers_by_layer.map((x) => num(x)) : [],
    tfmcc: parseTfmcc(v.tfmcc),
    started_at: num(v.started_at),
    packets_sent: num(v.packets_sent),
    bytes_sent: num(v.bytes_sent),
  };
}

function parseDecision(v: unknown): Decision | null {
  if (!isObj(v)) return null;
  const inputs: Record<string, number> = {};
  if (isObj(v.inputs)) {
    for (const [k, x] of Object.entries(v.inputs)) {
      if (typeof x === "number" && Number.isFinite(x)) inputs[k] = x;
    }
  }
  return { at_s: num(v.at_s), from: num(v.from), to: num(v.to), reason: str(v.reason), inputs };
}

export function parseViewer(v: unknown): Viewer | null {
  if (!isObj(v) || typeof v.id !== "string") return null;
  return {
    id: v.id,
    session_id: str(v.session_id),
    addr: str(v.addr),
    protocol: str(v.protocol, "?"),
    layers: num(v.layers),
    max_layers: num(v.max_layers),
    rate_bps: num(v.rate_bps),
    estimate_bps: numOrNull(v.estimate_bps),
    loss_ratio: num(v.loss_ratio),
    width: num(v.width),
    height: num(v.height),
    fps: num(v.fps),
    frames: num(v.frames),
    freezes: num(v.freezes),
    audio_packets: num(v.audio_packets),
    audio_lost: num(v.audio_lost),
    audio_concealed: num(v.audio_concealed),
    rtt_s: numOrNull(v.rtt_s),
    decisions: Array.isArray(v.decisions)
      ? v.decisions.map(parseDecision).filter((d): d is Decision => d !== null)
      : [],
    last_seen_s: num(v.last_seen_s),
    gone: v.gone === true,
  };
}

export function parseList<T>(v: unknown, f: (x: unknown) => T | null): { items: T[]; dropped: number } {
  if (!Array.isArray(v)) throw new ParseError("expected a JSON array");
  const items: T[] = [];
  let dropped = 0;
  for (const x of v) {
    const p = f(x);
    if (p === null) dropped++;
    else items.push(p);
  }
  return { items, dropped };
}

/** Parse one `/api/live` text frame. Throws ParseError if it is not a snapshot at all. */
export function parseSnapshot(text: string): { snapshot: Snapshot; stats: ParseStats } {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw new ParseError(`not JSON: ${(e as Error).message}`);
  }
  if (!isObj(v) || v.type !== "snapshot") throw new ParseError("not a snapshot message");
  const s = parseList(v.sessions ?? [], parseSession);
  const w = parseList(v.viewers ?? [], parseViewer);
  return {
    snapshot: {
      type: "snapshot",
      t: num(v.t, Date.now() / 1000),
      sessions: s.items,
      viewers: w.items,
      full: v.full !== false,
      removed: Array.isArray(v.removed) ? v.removed.filter((x): x is string => typeof x === "string") : [],
    },
    stats: { droppedSessions: s.dropped, droppedViewers: w.dropped },
  };
}
