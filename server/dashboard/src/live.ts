// The live connection: one WebSocket to /api/live, parsed snapshots into the Model, reconnect
// with backoff. Before the first frame (and after each reconnect) it also fetches
// /api/sessions and /api/viewers so the page is filled immediately, not a second later.
import { backoffDelay } from "./backoff";
import { Model } from "./model";
import { parseList, parseSession, parseSnapshot, parseViewer, ParseError } from "./parse";

export type ConnState = "connecting" | "open" | "waiting";

export interface ConnStatus {
  state: ConnState;
  attempt: number;
  retryAt: number | null;
  lastMessageAt: number | null;
  parseErrors: number;
  lastError: string | null;
}

export interface LiveOptions {
  base?: string; // e.g. "" (same origin) or "http://127.0.0.1:8080"
  /** Snapshots older than this with no new frame mark the connection stale (ms). */
  staleMs?: number;
  /** Read-only API token (the server's dashboard_token); default: the page's `access_token`
   *  query parameter, so the dashboard of a server with tokens opens as `/?access_token=…`. */
  token?: string | null;
}

/** The `access_token` query parameter of the page, if any. */
export function tokenFromLocation(search: string | undefined): string | null {
  if (!search) return null;
  return new URLSearchParams(search).get("access_token");
}

/** `url` with `access_token=` added (browsers cannot put a header on a WebSocket upgrade). */
export function withToken(url: string, token: string | null): string {
  if (!token) return url;
  return url + (url.includes("?") ? "&" : "?") + "access_token=" + encodeURIComponent(token);
}

type Listener = () => void;

/** Staleness watchdog: a socket that stays open but stops sending is closed and retried. */
export const STALE_MS = 5_000;

export function wsUrl(base: string, loc: { protocol: string; host: string }): string {
  if (base) return base.replace(/^http/, "ws").replace(/\/$/, "") + "/api/live";
  return `${loc.protocol === "https:" ? "wss:" : "ws:"}//${loc.host}/api/live`;
}

export class Live {
  readonly model = new Model();
  status: ConnStatus = { state: "connecting", attempt: 0, retryAt: null, lastMessageAt: null, parseErrors: 0, lastError: null };
  /** Bumped on every state change; the React store snapshot. */
  tick = 0;
  private listeners = new Set<Listener>();
  private ws: WebSocket | null = null;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private watchdog: ReturnType<typeof setInterval> | null = null;
  private stopped = false;
  private readonly base: string;
  private readonly staleMs: number;
  private readonly token: string | null;

  constructor(opts: LiveOptions = {}) {
    this.base = opts.base ?? "";
    this.staleMs = opts.staleMs ?? STALE_MS;
    this.token =
      opts.token !== undefined ? opts.token : tokenFromLocation(typeof window === "undefined" ? undefined : window.location?.search);
  }

  subscribe = (l: Listener): (() => void) => {
    this.listeners.add(l);
    return () => this.listeners.delete(l);
  };

  private emit(): void {
    this.status = { ...this.status };
    this.tick++;
    for (const l of this.listeners) l();
  }

  start(): void {
    this.stopped = false;
    void this.prime();
    this.connect();
    this.watchdog = setInterval(() => {
      const last = this.status.lastMessageAt;
      if (this.status.state === "open" && last !== null && Date.now() - last > this.staleMs) {
        this.status.lastError = "no snapshot for " + Math.round((Date.now() - last) / 1000) + " s";
        this.ws?.close();
      }
    }, 1000);
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.watchdog) clearInterval(this.watchdog);
    this.ws?.close();
  }

  /** One-shot REST fetch so the first paint has data; the WebSocket takes over afterwards. */
  private async prime(): Promise<void> {
    try {
      const [s, v] = await Promise.all([
        fetch(withToken(this.base + "/api/sessions", this.token)),
        fetch(withToken(this.base + "/api/viewers", this.token)),
      ]);
      if (!s.ok || !v.ok) return;
      const sessions = parseList(await s.json(), parseSession).items;
      const viewers = parseList(await v.json(), parseViewer).items;
      if (this.model.version === 0) {
        this.model.apply({ type: "snapshot", t: Date.now() / 1000 - 1, sessions, viewers });
        this.emit();
      }
    } catch {
      // The WebSocket path reports connection problems; the REST prime is best effort.
    }
  }

  private connect(): void {
    if (this.stopped) return;
    this.status.state = "connecting";
    this.status.retryAt = null;
    this.emit();
    let ws: WebSocket;
    try {
      ws = new WebSocket(withToken(wsUrl(this.base, window.location), this.token));
    } catch (e) {
      this.status.lastError = (e as Error).message;
      this.scheduleReconnect();
      return;
    }
    this.ws = ws;
    ws.onopen = () => {
      this.status.state = "open";
      this.status.attempt = 0;
      this.status.lastError = null;
      this.status.lastMessageAt = Date.now();
      this.emit();
    };
    ws.onmessage = (ev: MessageEvent) => {
      if (typeof ev.data !== "string") return;
      this.status.lastMessageAt = Date.now();
      try {
        const { snapshot } = parseSnapshot(ev.data);
        this.model.apply(snapshot);
      } catch (e) {
        if (!(e instanceof ParseError)) throw e;
        this.status.parseErrors++;
        this.status.lastError = e.message;
      }
      this.emit();
    };
    ws.onerror = () => {
      this.status.lastError = "WebSocket error";
    };
    ws.onclose = () => {
      if (this.ws === ws) this.ws = null;
      this.scheduleReconnect();
    };
  }

  private scheduleReconnect(): void {
    if (this.stopped) return;
    const delay = backoffDelay(this.status.attempt);
    this.status.attempt++;
    this.status.state = "waiting";
    this.status.retryAt = Date.now() + delay;
    this.emit();
    this.timer = setTimeout(() => {
      void this.prime();
      this.connect();
    }, delay);
  }
}
