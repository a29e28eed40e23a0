#!/usr/bin/env node
// Generates deploy/grafana/dashboards/*.json (checked in; re-run after editing this file:
// `node deploy/grafana/gen-dashboards.mjs`). One place for panel layout keeps the three
// dashboards consistent and lets deploy/prometheus/live-test.mjs read every query back.
import { writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const out = join(dirname(fileURLToPath(import.meta.url)), "dashboards");
const DS = { type: "prometheus", uid: "layercast-prometheus" };

let nextId = 1;
function panel(type, title, targets, grid, extra = {}) {
  return {
    id: nextId++,
    type,
    title,
    datasource: DS,
    gridPos: grid,
    targets: targets.map(([expr, legend], i) => ({ refId: String.fromCharCode(65 + i), datasource: DS, expr, legendFormat: legend ?? "", range: type !== "stat" && type !== "table", instant: type === "stat" || type === "table" })),
    ...extra,
  };
}
const ts = (title, targets, grid, unit, opts = {}) =>
  panel("timeseries", title, targets, grid, {
    fieldConfig: {
      defaults: {
        unit,
        min: 0,
        custom: { drawStyle: "line", lineInterpolation: opts.step ? "stepAfter" : "linear", fillOpacity: opts.stack ? 60 : 8, stacking: { mode: opts.stack ? "normal" : "none" } },
      },
      overrides: [],
    },
    options: { legend: { displayMode: "list", placement: "bottom" }, tooltip: { mode: "multi" } },
  });
const stat = (title, expr, grid, unit) =>
  panel("stat", title, [[expr]], grid, { fieldConfig: { defaults: { unit }, overrides: [] }, options: { reduceOptions: { calcs: ["lastNotNull"] }, colorMode: "value" } });
const table = (title, targets, grid) => panel("table", title, targets, grid, { options: { showHeader: true } });

function dashboard(uid, title, panels, templating = [], links = []) {
  return {
    uid,
    title,
    tags: ["layercast"],
    timezone: "utc",
    schemaVersion: 39,
    version: 1,
    refresh: "5s",
    time: { from: "now-30m", to: "now" },
    editable: true,
    graphTooltip: 1,
    links,
    templating: { list: templating },
    annotations: { list: [] },
    panels,
  };
}
const queryVar = (name, label, query) => ({
  name,
  label,
  type: "query",
  datasource: DS,
  query: { query, refId: "PrometheusVariableQueryEditor-VariableQuery" },
  definition: query,
  refresh: 2,
  includeAll: false,
  multi: false,
  sort: 1,
});
const nav = [
  { title: "Overview", type: "link", url: "/d/layercast-overview", keepTime: true },
  { title: "Session", type: "link", url: "/d/layercast-session", keepTime: true, includeVars: true },
  { title: "Viewer", type: "link", url: "/d/layercast-viewer", keepTime: true, includeVars: true },
  { title: "Edges", type: "link", url: "/d/layercast-edges", keepTime: true },
];

const lossBy = (by, sel) =>
  `sum by (${by}) (rate(layercast_viewer_packets_lost_total${sel}[$__rate_interval])) / (sum by (${by}) (rate(layercast_viewer_packets_lost_total${sel}[$__rate_interval])) + sum by (${by}) (rate(layercast_viewer_packets_received_total${sel}[$__rate_interval])))`;

// ---- overview ----
nextId = 1;
const overview = dashboard(
  "layercast-overview",
  "Layercast / Overview",
  [
    stat("Sessions", "count(layercast_sender_packets_total)", { x: 0, y: 0, w: 4, h: 4 }, "none"),
    stat("Active viewers", "sum(layercast_viewers)", { x: 4, y: 0, w: 4, h: 4 }, "none"),
    stat("Total send rate", "sum(rate(layercast_sender_bytes_total[$__rate_interval])) * 8", { x: 8, y: 0, w: 4, h: 4 }, "bps"),
    stat("Labelled viewers (cap applies)", "count(layercast_viewer_layers)", { x: 12, y: 0, w: 4, h: 4 }, "none"),
    stat("Targets up", 'sum(up{job=~"layercast-.*"})', { x: 16, y: 0, w: 4, h: 4 }, "none"),
    stat("Freezes / min", "sum(rate(layercast_viewer_freezes_total[$__rate_interval])) * 60", { x: 20, y: 0, w: 4, h: 4 }, "none"),
    ts("Send rate by session", [["rate(layercast_sender_bytes_total[$__rate_interval]) * 8", "{{session}}"]], { x: 0, y: 4, w: 12, h: 8 }, "bps"),
    ts("Viewers by layers held (all sessions)", [["sum by (layers) (layercast_viewers)", "{{layers}} layers"]], { x: 12, y: 4, w: 12, h: 8 }, "none", { stack: true }),
    ts("Packet loss ratio by session (labelled viewers)", [[lossBy("session", ""), "{{session}}"]], { x: 0, y: 12, w: 12, h: 8 }, "percentunit"),
    ts("TFMCC sending rate", [["layercast_tfmcc_rate_bps", "{{session}}"]], { x: 12, y: 12, w: 12, h: 8 }, "bps"),
    ts("Pacer bunch start error p99", [['layercast_sender_bunch_error_seconds{quantile="0.99"}', "{{session}}"]], { x: 0, y: 20, w: 12, h: 7 }, "s"),
    ts("Dropped input", [["sum by (what, reason) (rate(layercast_dropped_total[$__rate_interval]))", "{{what}} {{reason}}"]], { x: 12, y: 20, w: 12, h: 7 }, "reqps"),
    table("Worst viewers by loss (1 min)", [["topk(10, layercast:viewer_loss_ratio:rate1m)"]], { x: 0, y: 27, w: 24, h: 8 }),
  ],
  [],
  nav,
);

// ---- one session ----
nextId = 1;
const S = '{session="$session"}';
const session = dashboard(
  "layercast-session",
  "Layercast / Session",
  [
    stat("Viewers", `sum(layercast_viewers${S})`, { x: 0, y: 0, w: 4, h: 4 }, "none"),
    stat("Send rate", `rate(layercast_sender_bytes_total${S}[$__rate_interval]) * 8`, { x: 4, y: 0, w: 5, h: 4 }, "bps"),
    stat("Mean layers held (labelled)", `avg(layercast_viewer_layers${S})`, { x: 9, y: 0, w: 5, h: 4 }, "none"),
    stat("Loss ratio", lossBy("session", S), { x: 14, y: 0, w: 5, h: 4 }, "percentunit"),
    stat("Send errors / s", `rate(layercast_sender_send_errors_total${S}[$__rate_interval])`, { x: 19, y: 0, w: 5, h: 4 }, "none"),
    ts("Viewers by layers held", [[`sum by (layers) (layercast_viewers${S})`, "{{layers}} layers"]], { x: 0, y: 4, w: 12, h: 8 }, "none", { stack: true }),
    ts("Send rate and packets", [[`rate(layercast_sender_bytes_total${S}[$__rate_interval]) * 8`, "bit/s"], [`rate(layercast_sender_packets_total${S}[$__rate_interval])`, "packets/s"]], { x: 12, y: 4, w: 12, h: 8 }, "short"),
    ts(
      "Received rate across viewers (p10 / p50 / p90)",
      [
        [`quantile(0.1, layercast_viewer_rate_bps${S})`, "p10"],
        [`quantile(0.5, layercast_viewer_rate_bps${S})`, "p50"],
        [`quantile(0.9, layercast_viewer_rate_bps${S})`, "p90"],
      ],
      { x: 0, y: 12, w: 12, h: 8 },
      "bps",
    ),
    ts("Loss ratio, worst 10 viewers", [[`topk(10, layercast:viewer_loss_ratio:rate1m${S})`, "{{viewer}}"]], { x: 12, y: 12, w: 12, h: 8 }, "percentunit"),
    ts("Layer changes in 5 min, top 10 viewers", [[`topk(10, changes(layercast_viewer_layers${S}[5m]))`, "{{viewer}}"]], { x: 0, y: 20, w: 12, h: 8 }, "none"),
    ts("TFMCC rate (TFMCC sessions only)", [[`layercast_tfmcc_rate_bps${S}`, "rate"]], { x: 12, y: 20, w: 12, h: 8 }, "bps"),
    ts("Freezes per minute", [[`sum(rate(layercast_viewer_freezes_total${S}[$__rate_interval])) * 60`, "freezes/min"]], { x: 0, y: 28, w: 12, h: 7 }, "none"),
    ts("Pacer bunch start error", [[`layercast_sender_bunch_error_seconds${S}`, "q{{quantile}}"]], { x: 12, y: 28, w: 12, h: 7 }, "s"),
    // Issue 21: the audio track (viewers' reports and the sender's packets).
    ts(
      "Audio: lost packets and concealed frames per minute",
      [
        [`sum(rate(layercast_viewer_audio_lost_total${S}[$__rate_interval])) * 60`, "lost/min"],
        [`sum(rate(layercast_viewer_audio_concealed_frames_total${S}[$__rate_interval])) * 60`, "concealed frames/min"],
      ],
      { x: 0, y: 35, w: 12, h: 7 },
      "none",
    ),
    ts("Audio packets sent per second", [[`rate(layercast_audio_packets_total${S}[$__rate_interval])`, "sent"], [`rate(layercast_audio_dropped_total${S}[$__rate_interval])`, "dropped"]], { x: 12, y: 35, w: 12, h: 7 }, "pps"),
  ],
  [queryVar("session", "Session", "label_values(layercast_sender_packets_total, session)")],
  nav,
);

// ---- one viewer ----
nextId = 1;
const V = '{session="$session",viewer="$viewer"}';
const viewer = dashboard(
  "layercast-viewer",
  "Layercast / Viewer",
  [
    stat("Layers held", `layercast_viewer_layers${V}`, { x: 0, y: 0, w: 4, h: 4 }, "none"),
    stat("Received", `layercast_viewer_rate_bps${V}`, { x: 4, y: 0, w: 5, h: 4 }, "bps"),
    stat("Loss (1 min)", `layercast:viewer_loss_ratio:rate1m${V}`, { x: 9, y: 0, w: 5, h: 4 }, "percentunit"),
    stat("Freezes", `layercast_viewer_freezes_total${V}`, { x: 14, y: 0, w: 5, h: 4 }, "none"),
    stat("Layer changes (5 min)", `changes(layercast_viewer_layers${V}[5m])`, { x: 19, y: 0, w: 5, h: 4 }, "none"),
    ts("Layers held", [[`layercast_viewer_layers${V}`, "layers"]], { x: 0, y: 4, w: 12, h: 8 }, "none", { step: true }),
    ts("Received rate vs controller estimate", [[`layercast_viewer_rate_bps${V}`, "received"], [`layercast_viewer_estimate_bps${V}`, "estimate"]], { x: 12, y: 4, w: 12, h: 8 }, "bps"),
    ts(
      "Packets per second",
      [
        [`rate(layercast_viewer_packets_received_total${V}[$__rate_interval])`, "received"],
        [`rate(layercast_viewer_packets_lost_total${V}[$__rate_interval])`, "lost"],
      ],
      { x: 0, y: 12, w: 12, h: 8 },
      "pps",
    ),
    ts("Loss ratio", [[lossBy("viewer", V), "loss"]], { x: 12, y: 12, w: 12, h: 8 }, "percentunit"),
    ts("Freezes per minute", [[`rate(layercast_viewer_freezes_total${V}[$__rate_interval]) * 60`, "freezes/min"]], { x: 0, y: 20, w: 12, h: 7 }, "none"),
    ts("Session viewers by layers (context)", [[`sum by (layers) (layercast_viewers{session="$session"})`, "{{layers}} layers"]], { x: 12, y: 20, w: 12, h: 7 }, "none", { stack: true }),
    // The player's own /metrics (job layercast-player), matched by the same viewer id. Useful
    // beyond the server's per-viewer label cap and when telemetry does not reach the server.
    { id: nextId++, type: "row", title: "Player's own metrics (layercast_player_*)", collapsed: false, gridPos: { x: 0, y: 27, w: 24, h: 1 }, panels: [] },
    ts("Player: layers held", [[`layercast_player_layers{viewer="$viewer"}`, "layers"]], { x: 0, y: 28, w: 8, h: 7 }, "none", { step: true }),
    ts("Player: received vs estimate", [[`layercast_player_rate_bps{viewer="$viewer"}`, "received"], [`layercast_player_estimate_bps{viewer="$viewer"}`, "estimate"], [`rate(layercast_player_bytes_received_total{viewer="$viewer"}[$__rate_interval]) * 8`, "bytes counter x8"]], { x: 8, y: 28, w: 8, h: 7 }, "bps"),
    ts("Player: lost packets/s and dropped input", [[`rate(layercast_player_packets_lost_total{viewer="$viewer"}[$__rate_interval])`, "lost"], [`sum by (reason) (rate(layercast_player_dropped_total{viewer="$viewer"}[$__rate_interval]))`, "dropped {{reason}}"]], { x: 16, y: 28, w: 8, h: 7 }, "pps"),
    ts(
      "Audio per second (packets received, lost, frames concealed)",
      [
        [`rate(layercast_viewer_audio_packets_total${V}[$__rate_interval])`, "received"],
        [`rate(layercast_viewer_audio_lost_total${V}[$__rate_interval])`, "lost"],
        [`rate(layercast_viewer_audio_concealed_frames_total${V}[$__rate_interval])`, "concealed"],
      ],
      { x: 0, y: 35, w: 12, h: 7 },
      "pps",
    ),
  ],
  [queryVar("session", "Session", "label_values(layercast_viewer_layers, session)"), queryVar("viewer", "Viewer", 'label_values(layercast_viewer_layers{session="$session"}, viewer)')],
  nav,
);

// ---- WebRTC edges (job layercast-edge, one target per edge; docs/edge.md) ----
// Its queries are checked against a running edge by e2e/test/edge.test.ts (every metric it uses
// is in the edge's /metrics); the Prometheus live test's stack runs no edge.
nextId = 1;
const E = '{job="layercast-edge"}';
const byEdge = (m, extra = "") => `sum by (instance${extra}) (rate(${m}${E}[$__rate_interval]))`;
const edges = dashboard(
  "layercast-edges",
  "Layercast / Edges",
  [
    stat("Edges up", `sum(up${E})`, { x: 0, y: 0, w: 4, h: 4 }, "none"),
    stat("Browsers connected", `sum(layercast_edge_peers{job="layercast-edge",state="connected"})`, { x: 4, y: 0, w: 4, h: 4 }, "none"),
    stat("Sent to browsers", `sum(rate(layercast_edge_bytes_sent_total${E}[$__rate_interval])) * 8`, { x: 8, y: 0, w: 4, h: 4 }, "bps"),
    stat("RTX / media packets", `sum(rate(layercast_edge_rtx_packets_total${E}[$__rate_interval])) / sum(rate(layercast_edge_media_packets_total${E}[$__rate_interval]))`, { x: 12, y: 0, w: 4, h: 4 }, "percentunit"),
    stat("Key requests upstream / min", `sum(rate(layercast_edge_key_requests_total${E}[$__rate_interval])) * 60`, { x: 16, y: 0, w: 4, h: 4 }, "none"),
    stat("Refused offers / min", `sum(rate(layercast_edge_refused_total${E}[$__rate_interval])) * 60`, { x: 20, y: 0, w: 4, h: 4 }, "none"),
    ts("Browsers per edge", [[`sum by (instance, state) (layercast_edge_peers${E})`, "{{instance}} {{state}}"]], { x: 0, y: 4, w: 12, h: 8 }, "none", { stack: true }),
    ts("Sent per edge", [[`${byEdge("layercast_edge_bytes_sent_total")} * 8`, "{{instance}}"]], { x: 12, y: 4, w: 12, h: 8 }, "bps"),
    ts(
      "Repair per edge: NACKs, RTX, PLIs",
      [
        [byEdge("layercast_edge_nacks_total"), "{{instance}} NACK"],
        [byEdge("layercast_edge_rtx_packets_total"), "{{instance}} RTX"],
        [byEdge("layercast_edge_plis_total"), "{{instance}} PLI"],
      ],
      { x: 0, y: 12, w: 12, h: 8 },
      "pps",
    ),
    ts("Layer switches per edge", [[byEdge("layercast_edge_layer_switches_total", ", direction"), "{{instance}} {{direction}}"]], { x: 12, y: 12, w: 12, h: 8 }, "none"),
    ts(
      "Browser estimates (p10 / p50 / p90)",
      [
        [`quantile(0.1, layercast_edge_viewer_estimate_bps${E})`, "p10"],
        [`quantile(0.5, layercast_edge_viewer_estimate_bps${E})`, "p50"],
        [`quantile(0.9, layercast_edge_viewer_estimate_bps${E})`, "p90"],
      ],
      { x: 0, y: 20, w: 12, h: 8 },
      "bps",
    ),
    ts("Edge-added latency per frame, worst 10 browsers", [[`topk(10, layercast_edge_viewer_latency_seconds${E})`, "{{viewer}}"]], { x: 12, y: 20, w: 12, h: 8 }, "s"),
    ts(
      "Upstream per edge and session: frames released / lost",
      [
        [byEdge("layercast_edge_upstream_frames_released_total", ", session"), "{{instance}} {{session}} released"],
        [byEdge("layercast_edge_upstream_frames_lost_total", ", session"), "{{instance}} {{session}} lost"],
      ],
      { x: 0, y: 28, w: 12, h: 7 },
      "none",
    ),
    ts("Browsers by spatial layer sent", [[`count_values("spatial", layercast_edge_viewer_spatial${E})`, "S{{spatial}}"]], { x: 12, y: 28, w: 12, h: 7 }, "none", { stack: true }),
  ],
  [],
  nav,
);

for (const d of [overview, session, viewer, edges]) {
  const file = join(out, `${d.uid}.json`);
  writeFileSync(file, JSON.stringify(d, null, 2) + "\n");
  console.log(`wrote ${file} (${d.panels.length} panels)`);
}
