import { LAYER_COLORS } from "./charts";
import { fmtBps, fmtClock } from "./format";
import type { Decision } from "./types";

/** Layers held drawn as a ladder: one rung per layer the session offers, filled up to `held`. */
export function LayerLadder({ held, max, compact }: { held: number; max: number; compact?: boolean }) {
  const n = Math.max(max, held, 1);
  return (
    <span className={compact ? "ladder compact" : "ladder"} title={`${held} of ${max} layers`} aria-label={`${held} of ${max} layers`}>
      {Array.from({ length: n }, (_, k) => (
        <i key={k} style={{ background: k < held ? LAYER_COLORS[k % LAYER_COLORS.length] : undefined }} className={k < held ? "on" : "off"} />
      ))}
      <b data-testid="layers-text">
        {held}/{max}
      </b>
    </span>
  );
}

/** Received rate as a bar, controller estimate as a tick on the same scale. */
export function RateVsEstimate({ rate, estimate, scale }: { rate: number; estimate: number | null; scale: number }) {
  const s = scale > 0 ? scale : 1;
  const rw = Math.min(100, (rate / s) * 100);
  const ew = estimate !== null ? Math.min(100, (estimate / s) * 100) : null;
  return (
    <span className="rate-vs-est" title={`received ${fmtBps(rate)}, estimate ${fmtBps(estimate)}`}>
      <span className="track">
        <span className="fill" style={{ width: `${rw}%` }} />
        {ew !== null && <span className="tick" style={{ left: `${ew}%` }} />}
      </span>
      <span className="nums">
        {fmtBps(rate)}
        <small> / {estimate !== null ? fmtBps(estimate) : "–"}</small>
      </span>
    </span>
  );
}

/**
 * A compact timeline of the last `windowS` seconds: held layers as a step line and each
 * join/leave decision as a marker (green up = join, red down = leave), reason on hover.
 */
export function DecisionStrip({
  times,
  layers,
  decisions,
  now,
  windowS,
  maxLayers,
}: {
  times: readonly number[];
  layers: readonly number[];
  decisions: readonly Decision[];
  now: number;
  windowS: number;
  maxLayers: number;
}) {
  const W = 180;
  const H = 30;
  const t0 = now - windowS;
  const x = (t: number) => ((t - t0) / windowS) * W;
  const top = Math.max(1, maxLayers);
  const y = (l: number) => H - 3 - (Math.min(l, top) / top) * (H - 6);
  let d = "";
  let pen = false;
  for (let i = 0; i < times.length; i++) {
    const t = times[i]!;
    const l = layers[i]!;
    if (t < t0 || !Number.isFinite(l)) {
      pen = false;
      continue;
    }
    d += pen ? `H${x(t).toFixed(1)}V${y(l).toFixed(1)}` : `M${x(t).toFixed(1)},${y(l).toFixed(1)}`;
    pen = true;
  }
  const recent = decisions.filter((dc) => dc.at_s >= t0 && dc.to !== dc.from);
  return (
    <svg className="strip" viewBox={`0 0 ${W} ${H}`} width={W} height={H} aria-label="layer decisions timeline">
      <path d={d} stroke="#4292c6" fill="none" strokeWidth={1.5} />
      {recent.map((dc, i) => {
        const up = dc.to > dc.from;
        const cx = x(dc.at_s);
        return (
          <path
            key={i}
            d={up ? `M${cx - 3},${H - 1}L${cx},${H - 7}L${cx + 3},${H - 1}Z` : `M${cx - 3},1L${cx},7L${cx + 3},1Z`}
            fill={up ? "#2ca02c" : "#d62728"}
          >
            <title>{`${fmtClock(dc.at_s)} ${dc.from}→${dc.to}: ${dc.reason}`}</title>
          </path>
        );
      })}
    </svg>
  );
}
