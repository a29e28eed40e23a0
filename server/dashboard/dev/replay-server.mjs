#!/usr/bin/env node
// DEV TOOL ONLY (never used by the tests): a stand-in for layercast-server's HTTP/WebSocket API
// so the dashboard can be developed before/without the real server.
//
//   node dev/replay-server.mjs --file dev/sample-recording.jsonl   replay recorded snapshots (looped)
//   node dev/replay-server.mjs --synthetic 1000                     generate 1,000 fake viewers
//   options: --port 8080 (default) --dist dist (serve the built dashboard too)
//
// Recordings are JSON lines, one `/api/live` snapshot per line (see dev/record.mjs).
// The WebSocket server is a minimal RFC 6455 text-frame sender (server frames are unmasked);
// it never needs to read client frames beyond noticing a close.
import { createHash } from "node:crypto";
import { createReadStream, existsSync, readFileSync, statSync } from "node:fs";
import { createServer } from "node:http";
import { extname, join, normalize } from "node:path";

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && args[i + 1] !== undefined ? args[i + 1] : dflt;
};
const port = Number(opt("port", "8080"));
const file = opt("file", "");
const synthetic = Number(opt("synthetic", file ? "0" : "60"));
const dist = opt("dist", "dist");

// ---- snapshot sources ----
let frames = [];
if (file) {
  frames = readFileSync(file, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l));
  if (frames.length === 0) throw new Error(`${file}: no snapshots`);
  console.log(`replaying ${frames.length} snapshots from ${file}`);
}

function rng(seed) {
  let s = seed >>> 0;
  return () => ((s = (s * 1664525 + 1013904223) >>> 0) / 2 ** 32);
}

function makeSynthetic(n) {
  const rand = rng(42);
  const layers = [128e3, 256e3, 512e3, 1024e3, 2048e3];
  const labels = ["S0T0 320x180@7.5", "S0T1 320x180@15", "S1T1 640x360@15", "S1T2 640x360@30", "S2T2 1280x720@30"];
  const res = [[320, 180, 7.5], [320, 180, 15], [640, 360, 15], [640, 360, 30], [1280, 720, 30]];
  let cum = 0;
  const ladder = layers.map((r, k) => ({ index: k, rate_bps: r, cumulative_bps: (cum += r), group: `239.255.77.${k}`, port: 5004 + 2 * k, label: labels[k] }));
  const viewers = Array.from({ length: n }, (_, i) => ({
    id: `v${String(i).padStart(4, "0")}`,
    session_id: i % 10 === 9 ? "tf" : "main",
    addr: `10.${(i >> 8) & 255}.${i & 255}.2:${40000 + i}`,
    capacity: 200e3 + rand() * 4.5e6,
    layers: 1,
    decisions: [],
    frames: 0,
    freezes: 0,
    rtt: 0.01 + rand() * 0.1,
  }));
  let bytes = 0;
  let packets = 0;
  const t0 = Date.now() / 1000;
  return () => {
    const t = Date.now() / 1000;
    const phase = Math.floor((t - t0) / 30) % 2; // every 30 s the "bottleneck" halves for some viewers
    let tfClr = null;
    let tfMin = Infinity;
    const out = viewers.map((v, i) => {
      const cap = v.capacity * (phase === 1 && i % 3 === 0 ? 0.4 : 1);
      const want = ladder.filter((l) => l.cumulative_bps <= cap).length || 1;
      if (want !== v.layers && rand() < 0.3) {
        const to = want > v.layers ? v.layers + 1 : want;
        v.decisions.push({ at_s: t, from: v.layers, to, reason: to > v.layers ? "join: estimate above next cumulative rate" : "leave: loss above threshold", inputs: { estimate_bps: cap, loss: to < v.layers ? 0.08 : 0 } });
        if (v.decisions.length > 50) v.decisions.shift();
        v.layers = to;
      }
      const rate = ladder[v.layers - 1].cumulative_bps;
      const loss = rate > cap ? 1 - cap / rate : rand() < 0.1 ? rand() * 0.01 : 0;
      const [w, h, fps] = res[v.layers - 1];
      v.frames += fps;
      if (loss > 0.05 && rand() < 0.2) v.freezes++;
      if (v.session_id === "tf" && cap < tfMin) {
        tfMin = cap;
        tfClr = v.id;
      }
      return {
        id: v.id, session_id: v.session_id, addr: v.addr, protocol: v.session_id === "tf" ? "tfmcc" : "era",
        layers: v.layers, max_layers: ladder.length, rate_bps: rate * (1 - loss), estimate_bps: cap * (0.9 + rand() * 0.2),
        loss_ratio: loss, width: w, height: h, fps: fps * (1 - loss), frames: v.frames, freezes: v.freezes,
        rtt_s: v.session_id === "tf" ? v.rtt : null, decisions: v.decisions, last_seen_s: t, gone: false,
      };
    });
    bytes += ladder[ladder.length - 1].cumulative_bps / 8;
    packets += Math.round(ladder[ladder.length - 1].cumulative_bps / 8 / 512);
    const count = (sid) => {
      const c = new Array(ladder.length).fill(0);
      for (const v of out) if (v.session_id === sid) c[v.layers - 1]++;
      return c;
    };
    return {
      type: "snapshot",
      t,
      sessions: [
        { id: "main", name: "main", protocol: "era", source: "synthetic", codec: "VP9 L3T3 1280x720@30", layers: ladder, viewers_by_layer: count("main"), tfmcc: null, started_at: t0, packets_sent: packets, bytes_sent: bytes },
        { id: "tf", name: "tfmcc-demo", protocol: "tfmcc", source: "synthetic", codec: "", layers: ladder, viewers_by_layer: count("tf"), tfmcc: { rate_bps: Math.min(tfMin, 3.9e6), clr: tfClr, reports_per_round: 1 + rand() }, started_at: t0, packets_sent: packets, bytes_sent: bytes },
      ],
      viewers: out,
    };
  };
}

let next;
if (file) {
  let i = 0;
  let last = 0;
  next = () => {
    const f = frames[i++ % frames.length];
    // Re-stamp so time keeps moving forward across loops of the recording.
    last = Math.max(last + 1, Date.now() / 1000);
    return { ...f, t: last };
  };
} else {
  next = makeSynthetic(synthetic);
  console.log(`synthetic: ${synthetic} viewers`);
}
let current = next();

// ---- WebSocket ----
const clients = new Set();
function wsFrame(text) {
  const payload = Buffer.from(text, "utf8");
  const n = payload.length;
  const head = n < 126 ? Buffer.from([0x81, n]) : n < 65536 ? Buffer.from([0x81, 126, n >> 8, n & 255]) : Buffer.alloc(10);
  if (n >= 65536) {
    head[0] = 0x81;
    head[1] = 127;
    head.writeBigUInt64BE(BigInt(n), 2);
  }
  return Buffer.concat([head, payload]);
}

setInterval(() => {
  current = next();
  const frame = wsFrame(JSON.stringify(current));
  for (const s of clients) s.write(frame);
}, 1000);

// ---- HTTP ----
const types = { ".html": "text/html", ".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml", ".json": "application/json" };
const server = createServer((req, res) => {
  const url = new URL(req.url ?? "/", "http://x");
  if (url.pathname === "/api/sessions") return json(res, current.sessions);
  if (url.pathname === "/api/viewers") return json(res, current.viewers);
  if (url.pathname.startsWith("/api/")) {
    res.writeHead(404, { "content-type": "application/json" });
    return res.end(JSON.stringify({ error: "not in replay server" }));
  }
  const rel = normalize(url.pathname === "/" ? "/index.html" : url.pathname).replace(/^(\.\.[/\\])+/, "");
  const path = join(dist, rel);
  if (!existsSync(path) || !statSync(path).isFile()) {
    res.writeHead(404);
    return res.end("not found (build the dashboard first: npm run build)");
  }
  res.writeHead(200, { "content-type": types[extname(path)] ?? "application/octet-stream" });
  createReadStream(path).pipe(res);
});
function json(res, v) {
  res.writeHead(200, { "content-type": "application/json" });
  res.end(JSON.stringify(v));
}
server.on("upgrade", (req, socket) => {
  if (!req.url?.startsWith("/api/live") || !req.headers["sec-websocket-key"]) return socket.destroy();
  const accept = createHash("sha1").update(req.headers["sec-websocket-key"] + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest("base64");
  socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`);
  clients.add(socket);
  socket.write(wsFrame(JSON.stringify(current)));
  socket.on("data", (b) => {
    if ((b[0] & 0x0f) === 0x8) socket.end(); // close frame
  });
  socket.on("close", () => clients.delete(socket));
  socket.on("error", () => clients.delete(socket));
});
server.listen(port, "127.0.0.1", () => console.log(`replay server on http://127.0.0.1:${port}/ (dist: ${dist})`));
