import { LAYER_COLORS, Histogram, LineChart, StackedAreaChart } from "./charts";
import { fmtBps, fmtBytes, fmtClock, fmtCount, fmtDuration, fmtPct } from "./format";
import { HISTORY_S, viewersByLayer, type Model } from "./model";
import type { Session } from "./types";

export function SessionsView({ model }: { model: Model }) {
  if (model.sessions.length === 0) {
    return <p className="empty">No sessions. Start one with <code>layercast-server</code> or <code>POST /api/sessions</code>.</p>;
  }
  return (
    <div className="sessions">
      {model.sessions.map((s) => (
        <SessionCard key={s.id} model={model} s={s} />
      ))}
    </div>
  );
}

function SessionCard({ model, s }: { model: Model; s: Session }) {
  const viewers = model.viewers.filter((v) => v.session_id === s.id && !v.gone);
  const vbl = viewersByLayer(s, viewers);
  const hist = model.sessionHist.get(s.id);
  const times = hist ? hist.ring.times() : [];
  const maxVbl = Math.max(1, ...vbl);
  const clrViewer = s.tfmcc?.clr ? model.viewerById.get(s.tfmcc.clr) : undefined;
  const send = hist?.ring.last("send_bps");
  return (
    <section className="card session" data-testid="session-card" data-session-id={s.id}>
      <header>
        <h2>
          {s.name} <small>{s.id}</small>
        </h2>
        <span className={`proto proto-${s.protocol}`}>{s.protocol.toUpperCase()}</span>
      </header>
      <dl className="facts">
        <dt>Source</dt>
        <dd>{s.source || "–"}</dd>
        <dt>Codec</dt>
        <dd>{s.codec || "–"}</dd>
        <dt>Up</dt>
        <dd>{s.started_at > 0 ? fmtDuration(model.t - s.started_at) : "–"}</dd>
        <dt>Sent</dt>
        <dd>
          {fmtCount(s.packets_sent)} pkts, {fmtBytes(s.bytes_sent)} ({fmtBps(send)})
        </dd>
        <dt>Viewers</dt>
        <dd>
          {viewers.length} <a href={`#/viewers/${encodeURIComponent(s.id)}`}>list →</a>
        </dd>
      </dl>
      {s.tfmcc && (
        <div className="tfmcc" data-testid="tfmcc">
          <b>TFMCC</b> rate {fmtBps(s.tfmcc.rate_bps)} · limiting receiver{" "}
          {s.tfmcc.clr ? (
            <a href={`#/viewer/${encodeURIComponent(s.tfmcc.clr)}`}>
              {s.tfmcc.clr}
              {clrViewer ? ` (${clrViewer.addr}, loss ${fmtPct(clrViewer.loss_ratio)}, rtt ${clrViewer.rtt_s !== null ? (clrViewer.rtt_s * 1000).toFixed(0) + " ms" : "–"})` : ""}
            </a>
          ) : (
            "none yet"
          )}{" "}
          · {s.tfmcc.reports_per_round.toFixed(1)} reports/round
        </div>
      )}
      <table className="ladder-table">
        <thead>
          <tr>
            <th>Layer</th>
            <th>Label</th>
            <th>Rate</th>
            <th>Cumulative</th>
            <th>Group</th>
            <th>Viewers holding exactly k+1</th>
          </tr>
        </thead>
        <tbody>
          {s.layers.map((l, k) => (
            <tr key={k}>
              <td>
                <i className="swatch" style={{ background: LAYER_COLORS[k % LAYER_COLORS.length] }} />
                {l.index}
              </td>
              <td>{l.label}</td>
              <td>{fmtBps(l.rate_bps)}</td>
              <td>{fmtBps(l.cumulative_bps)}</td>
              <td>
                <code>
                  {l.group}:{l.port}
                </code>
              </td>
              <td className="hbar">
                <span style={{ width: `${((vbl[k] ?? 0) / maxVbl) * 100}%` }} />
                {vbl[k] ?? 0}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <div className="charts2">
        <Histogram
          title="Viewers by layers held"
          labels={vbl.map((_, k) => String(k + 1))}
          counts={vbl}
          colors={vbl.map((_, k) => LAYER_COLORS[k % LAYER_COLORS.length]!)}
          testId="session-histogram"
        />
        {hist && (
          <StackedAreaChart
            title="Viewers by layers, last 5 min"
            times={times}
            windowS={HISTORY_S}
            yFormat={(v) => String(Math.round(v))}
            series={vbl.map((_, k) => ({ label: String(k + 1), color: LAYER_COLORS[k % LAYER_COLORS.length]!, values: hist.byLayer.values(`l${k}`) }))}
          />
        )}
        {hist && (
          <LineChart
            title="Rates"
            times={times}
            windowS={HISTORY_S}
            yFormat={fmtBps}
            series={[
              { label: "sent", color: "#08519c", values: hist.ring.values("send_bps") },
              { label: "mean received", color: "#31a354", values: hist.ring.values("recv_bps_mean") },
              ...(s.tfmcc ? [{ label: "TFMCC rate", color: "#e6550d", values: hist.ring.values("tfmcc_bps"), dash: true }] : []),
            ]}
          />
        )}
      </div>
      <p className="muted">Snapshot {fmtClock(model.t)}</p>
    </section>
  );
}
