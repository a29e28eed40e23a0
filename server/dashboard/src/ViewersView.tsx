import { useLayoutEffect, useRef, useState } from "react";
import { Histogram, LAYER_COLORS, LineChart } from "./charts";
import { fmtBps, fmtPct, fmtRes } from "./format";
import { filterSortViewers, HISTORY_S, LOSS_BUCKET_LABELS, type Model, type SortKey } from "./model";
import { virtualWindow } from "./virtual";
import { DecisionStrip, LayerLadder, RateVsEstimate } from "./widgets";
import type { Viewer } from "./types";

export const ROW_H = 44;

export function ViewersView({ model, session }: { model: Model; session?: string }) {
  const [text, setText] = useState("");
  const [sort, setSort] = useState<SortKey>("id");
  const [desc, setDesc] = useState(false);
  const [hideGone, setHideGone] = useState(false);
  const [sessionFilter, setSessionFilter] = useState(session ?? "");
  const rows = filterSortViewers(model, { text, sort, desc, hideGone, session: sessionFilter || undefined });
  const agg = model.agg;
  const times = model.global.times();
  const rateScale = rows.reduce((m, v) => Math.max(m, v.rate_bps, v.estimate_bps ?? 0, layerTop(model, v)), 1);

  const header = (k: SortKey, label: string) => (
    <button
      className={sort === k ? "sort active" : "sort"}
      onClick={() => {
        if (sort === k) setDesc(!desc);
        else {
          setSort(k);
          setDesc(k !== "id");
        }
      }}
    >
      {label}
      {sort === k ? (desc ? " ▼" : " ▲") : ""}
    </button>
  );

  return (
    <div className="viewers">
      <section className="agg card">
        <div className="stats">
          <div>
            <b data-testid="active-count">{agg.active}</b> active / {agg.total} listed
          </div>
          <div>
            rate p10/p50/p90 <b>{fmtBps(agg.rateP10)}</b> / <b>{fmtBps(agg.rateP50)}</b> / <b>{fmtBps(agg.rateP90)}</b>
          </div>
          <div>
            mean loss <b>{fmtPct(agg.lossMean)}</b> · mean layers <b>{Number.isFinite(agg.layersMean) ? agg.layersMean.toFixed(2) : "–"}</b> · freezes{" "}
            <b>{agg.freezesTotal}</b>
          </div>
        </div>
        <div className="charts3">
          <Histogram
            title="Layers held (all sessions)"
            labels={agg.layersHist.map((_, k) => String(k))}
            counts={agg.layersHist}
            colors={agg.layersHist.map((_, k) => (k === 0 ? "#bbb" : LAYER_COLORS[(k - 1) % LAYER_COLORS.length]!))}
            testId="layers-histogram"
          />
          <Histogram title="Loss ratio" labels={LOSS_BUCKET_LABELS} counts={agg.lossHist} colors={["#31a354", "#a1d99b", "#fdae6b", "#fd8d3c", "#e6550d", "#a63603"]} />
          <LineChart
            title="Received rate quantiles"
            times={times}
            windowS={HISTORY_S}
            yFormat={fmtBps}
            height={120}
            series={[
              { label: "p10", color: "#d62728", values: model.global.values("rate_p10") },
              { label: "p50", color: "#2171b5", values: model.global.values("rate_p50") },
              { label: "p90", color: "#31a354", values: model.global.values("rate_p90") },
            ]}
          />
        </div>
      </section>
      <div className="toolbar">
        <input placeholder="filter by id, address, protocol" value={text} onChange={(e) => setText(e.target.value)} aria-label="filter viewers" />
        <select value={sessionFilter} onChange={(e) => setSessionFilter(e.target.value)} aria-label="session">
          <option value="">all sessions</option>
          {model.sessions.map((s) => (
            <option key={s.id} value={s.id}>
              {s.name}
            </option>
          ))}
        </select>
        <label>
          <input type="checkbox" checked={hideGone} onChange={(e) => setHideGone(e.target.checked)} /> hide gone
        </label>
        <span className="muted">{rows.length} rows</span>
      </div>
      <div className="vhead row">
        <span className="c-id">{header("id", "Viewer")}</span>
        <span className="c-ladder">{header("layers", "Layers")}</span>
        <span className="c-rate">{header("rate", "Received / estimate")}</span>
        <span className="c-loss">{header("loss", "Loss")}</span>
        <span className="c-res">Resolution</span>
        <span className="c-fps">{header("fps", "fps")}</span>
        <span className="c-frz">{header("freezes", "Freezes")}</span>
        <span className="c-strip">{header("last_change", "Decisions (5 min)")}</span>
        <span className="c-reason">Last layer change</span>
      </div>
      <VirtualRows model={model} rows={rows} rateScale={rateScale} />
    </div>
  );
}

function layerTop(model: Model, v: Viewer): number {
  const s = model.sessionById.get(v.session_id);
  const l = s?.layers[s.layers.length - 1];
  return l ? l.cumulative_bps : 0;
}

function VirtualRows({ model, rows, rateScale }: { model: Model; rows: Viewer[]; rateScale: number }) {
  const ref = useRef<HTMLDivElement>(null);
  const [scrollTop, setScrollTop] = useState(0);
  const [height, setHeight] = useState(600);
  useLayoutEffect(() => {
    const el = ref.current;
    if (!el) return;
    const ro = new ResizeObserver(() => setHeight(el.clientHeight));
    ro.observe(el);
    setHeight(el.clientHeight);
    return () => ro.disconnect();
  }, []);
  const w = virtualWindow(rows.length, ROW_H, scrollTop, height);
  const slice = rows.slice(w.start, w.end);
  return (
    <div className="vlist" ref={ref} onScroll={(e) => setScrollTop(e.currentTarget.scrollTop)} data-testid="viewer-list">
      <div style={{ height: w.totalHeight, position: "relative" }}>
        <div style={{ transform: `translateY(${w.offsetTop}px)` }}>
          {slice.map((v) => (
            <ViewerRow key={v.id} model={model} v={v} rateScale={rateScale} />
          ))}
        </div>
      </div>
    </div>
  );
}

function ViewerRow({ model, v, rateScale }: { model: Model; v: Viewer; rateScale: number }) {
  const hist = model.viewerHist.get(v.id);
  const decisions = model.changes.get(v.id) ?? [];
  const last = decisions[decisions.length - 1];
  return (
    <a
      className={v.gone ? "row viewer gone" : "row viewer"}
      href={`#/viewer/${encodeURIComponent(v.id)}`}
      style={{ height: ROW_H }}
      data-testid="viewer-row"
      data-viewer-id={v.id}
    >
      <span className="c-id">
        <b>{v.id}</b>
        <small>
          {v.addr} · {v.protocol}
          {v.gone ? " · gone" : ""}
        </small>
      </span>
      <span className="c-ladder">
        <LayerLadder held={v.layers} max={v.max_layers} />
      </span>
      <span className="c-rate">
        <RateVsEstimate rate={v.rate_bps} estimate={v.estimate_bps} scale={rateScale} />
      </span>
      <span className={v.loss_ratio > 0.05 ? "c-loss bad" : "c-loss"}>{fmtPct(v.loss_ratio)}</span>
      <span className="c-res">{fmtRes(v.width, v.height)}</span>
      <span className="c-fps">{v.fps.toFixed(1)}</span>
      <span className={v.freezes > 0 ? "c-frz warn" : "c-frz"}>{v.freezes}</span>
      <span className="c-strip">
        <DecisionStrip
          times={hist ? hist.times() : []}
          layers={hist ? hist.values("layers") : []}
          decisions={decisions}
          now={model.t}
          windowS={HISTORY_S}
          maxLayers={v.max_layers}
        />
      </span>
      <span className="c-reason" title={last ? last.reason : ""}>
        {last ? `${last.from}→${last.to} ${last.reason}` : "–"}
      </span>
    </a>
  );
}
