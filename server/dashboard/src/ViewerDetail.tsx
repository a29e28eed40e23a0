import { useState } from "react";
import { LineChart } from "./charts";
import { fmtBps, fmtClock, fmtPct, fmtRes } from "./format";
import { HISTORY_S, type Model } from "./model";
import { LayerLadder } from "./widgets";

export function ViewerDetail({ model, id }: { model: Model; id: string }) {
  const [holds, setHolds] = useState(false);
  const v = model.viewerById.get(id);
  const hist = model.viewerHist.get(id);
  if (!v || !hist) {
    return (
      <p className="empty">
        Viewer <code>{id}</code> is not (or no longer) listed by the server. <a href="#/viewers">Back to viewers</a>
      </p>
    );
  }
  const session = model.sessionById.get(v.session_id);
  const decisions = (holds ? model.decisions.get(id) : model.changes.get(id)) ?? [];
  const times = hist.times();
  const isClr = session?.tfmcc?.clr === id;
  return (
    <div className="detail" data-testid="viewer-detail">
      <header className="card">
        <h2>
          <a href="#/viewers">Viewers</a> / {v.id} {v.gone && <span className="tag">gone</span>} {isClr && <span className="tag clr">TFMCC limiting receiver</span>}
        </h2>
        <dl className="facts">
          <dt>Address</dt>
          <dd>{v.addr}</dd>
          <dt>Session</dt>
          <dd>
            {session ? session.name : v.session_id} · {v.protocol}
          </dd>
          <dt>Layers</dt>
          <dd>
            <LayerLadder held={v.layers} max={v.max_layers} />
          </dd>
          <dt>Received</dt>
          <dd>
            {fmtBps(v.rate_bps)} (estimate {fmtBps(v.estimate_bps)})
          </dd>
          <dt>Loss</dt>
          <dd>{fmtPct(v.loss_ratio, 2)}</dd>
          <dt>RTT</dt>
          <dd>{v.rtt_s !== null ? (v.rtt_s * 1000).toFixed(1) + " ms" : "–"}</dd>
          <dt>Picture</dt>
          <dd>
            {fmtRes(v.width, v.height)} @ {v.fps.toFixed(1)} fps · {v.frames} frames · {v.freezes} freezes
          </dd>
          <dt>Audio</dt>
          <dd>
            {v.audio_packets > 0
              ? `${v.audio_packets} packets · ${v.audio_lost} lost · ${v.audio_concealed} frames concealed`
              : "–"}
          </dd>
          <dt>Last report</dt>
          <dd>{fmtClock(v.last_seen_s)}</dd>
        </dl>
      </header>
      <div className="charts2">
        <LineChart
          title="Layers held"
          times={times}
          windowS={HISTORY_S}
          yMax={Math.max(1, v.max_layers)}
          yFormat={(x) => (Number.isInteger(x) ? String(x) : x.toFixed(1))}
          series={[{ label: "layers", color: "#2171b5", values: hist.values("layers"), step: true }]}
        />
        <LineChart
          title="Rate"
          times={times}
          windowS={HISTORY_S}
          yFormat={fmtBps}
          series={[
            { label: "received", color: "#31a354", values: hist.values("rate") },
            { label: "controller estimate", color: "#e6550d", values: hist.values("estimate"), dash: true },
          ]}
        />
        <LineChart
          title="Loss ratio"
          times={times}
          windowS={HISTORY_S}
          yFormat={(x) => fmtPct(x, 1)}
          series={[{ label: "loss", color: "#d62728", values: hist.values("loss") }]}
        />
        <LineChart
          title="Frame rate"
          times={times}
          windowS={HISTORY_S}
          yFormat={(x) => (Number.isInteger(x) ? String(x) : x.toFixed(1))}
          series={[{ label: "fps", color: "#756bb1", values: hist.values("fps") }]}
        />
      </div>
      <section className="card">
        <h3>
          {holds ? "All controller decisions" : "Layer changes"} ({decisions.length}){" "}
          <label className="muted small">
            <input type="checkbox" checked={holds} onChange={(e) => setHolds(e.target.checked)} /> include decisions that kept the layer count
          </label>
        </h3>
        <table className="decisions" data-testid="decisions">
          <thead>
            <tr>
              <th>Time</th>
              <th>Change</th>
              <th>Reason</th>
              <th>Inputs</th>
            </tr>
          </thead>
          <tbody>
            {[...decisions].reverse().map((d, i) => (
              <tr key={i} className={d.to > d.from ? "up" : d.to < d.from ? "down" : "hold"}>
                <td>{fmtClock(d.at_s)}</td>
                <td>
                  {d.from} → {d.to}
                </td>
                <td>{d.reason}</td>
                <td className="inputs">
                  {Object.entries(d.inputs)
                    .map(([k, x]) => `${k}=${Number.isInteger(x) ? x : x.toPrecision(4)}`)
                    .join("  ")}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </section>
    </div>
  );
}
