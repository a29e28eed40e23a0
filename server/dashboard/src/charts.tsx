import { useLayoutEffect, useRef, useState, type RefObject } from "react";
import { linePath, niceMax, stack } from "./chartmath";

/** Track an element's pixel width so SVG charts draw in real pixels (undistorted text). */
function useWidth(): [RefObject<HTMLElement | null>, number] {
  const ref = useRef<HTMLElement | null>(null);
  const [w, setW] = useState(600);
  useLayoutEffect(() => {
    const el = ref.current;
    if (!el) return;
    const measure = () => setW(Math.max(200, Math.floor(el.clientWidth - 12)));
    measure();
    const ro = new ResizeObserver(measure);
    ro.observe(el);
    return () => ro.disconnect();
  }, []);
  return [ref, w];
}

export interface LineSeries {
  label: string;
  color: string;
  values: readonly number[];
  step?: boolean;
  dash?: boolean;
}

const PAD_L = 56;
const PAD_R = 8;
const PAD_T = 8;
const PAD_B = 18;

interface Frame {
  times: readonly number[];
  windowS: number;
  height?: number;
  title: string;
  yFormat: (v: number) => string;
  yMax?: number;
}

function axes(f: Frame, dataMax: number, W: number) {
  const h = f.height ?? 140;
  const tEnd = f.times.length ? f.times[f.times.length - 1]! : 0;
  const tStart = tEnd - f.windowS;
  const ymax = f.yMax ?? niceMax(dataMax);
  const x = (t: number) => PAD_L + ((t - tStart) / f.windowS) * (W - PAD_L - PAD_R);
  const y = (v: number) => PAD_T + (1 - Math.min(v, ymax * 1.05) / ymax) * (h - PAD_T - PAD_B);
  return { h, x, y, ymax, W };
}

function Grid({ W, h, y, ymax, yFormat, windowS }: { W: number; h: number; y: (v: number) => number; ymax: number; yFormat: (v: number) => string; windowS: number }) {
  const ticks = [0, 0.5, 1].map((f) => f * ymax);
  return (
    <g className="grid">
      {ticks.map((v) => (
        <g key={v}>
          <line x1={PAD_L} x2={W - PAD_R} y1={y(v)} y2={y(v)} />
          <text x={PAD_L - 4} y={y(v) + 4} textAnchor="end">
            {yFormat(v)}
          </text>
        </g>
      ))}
      <text x={PAD_L} y={h - 4}>
        −{Math.round(windowS / 60)} min
      </text>
      <text x={W - PAD_R} y={h - 4} textAnchor="end">
        now
      </text>
    </g>
  );
}

export function LineChart(props: Frame & { series: LineSeries[] }) {
  let dataMax = 0;
  for (const s of props.series) for (const v of s.values) if (Number.isFinite(v) && v > dataMax) dataMax = v;
  const [ref, width] = useWidth();
  const { h, x, y, ymax, W } = axes(props, dataMax, width);
  return (
    <figure className="chart" ref={ref}>
      <figcaption>
        {props.title}
        {props.series.map((s) => (
          <span key={s.label} className="legend">
            <i style={{ background: s.color }} />
            {s.label}
          </span>
        ))}
      </figcaption>
      <svg viewBox={`0 0 ${W} ${h}`} height={h} role="img" aria-label={props.title}>
        <Grid W={W} h={h} y={y} ymax={ymax} yFormat={props.yFormat} windowS={props.windowS} />
        {props.series.map((s) => (
          <path
            key={s.label}
            d={linePath(props.times, s.values, x, y, s.step)}
            stroke={s.color}
            strokeDasharray={s.dash ? "4 3" : undefined}
            fill="none"
            strokeWidth={1.6}
          />
        ))}
      </svg>
    </figure>
  );
}

export const LAYER_COLORS = ["#9ecae1", "#6baed6", "#4292c6", "#2171b5", "#08519c", "#08306b", "#3f007d", "#54278f", "#756bb1", "#9e9ac8", "#bcbddc", "#dadaeb", "#fdd0a2", "#fdae6b", "#fd8d3c", "#e6550d"];

export function StackedAreaChart(props: Frame & { series: LineSeries[] }) {
  const stacks = stack(props.series.map((s) => s.values));
  let dataMax = 0;
  const top = stacks[stacks.length - 1] ?? [];
  for (const v of top) if (v > dataMax) dataMax = v;
  const [ref, width] = useWidth();
  const { h, x, y, ymax, W } = axes(props, dataMax, width);
  const ts = props.times;
  const areas = stacks.map((upper, k) => {
    if (ts.length === 0) return "";
    const lower = k > 0 ? stacks[k - 1]! : ts.map(() => 0);
    let d = `M${x(ts[0]!).toFixed(1)},${y(upper[0]!).toFixed(1)}`;
    for (let i = 1; i < ts.length; i++) d += `H${x(ts[i]!).toFixed(1)}V${y(upper[i]!).toFixed(1)}`;
    for (let i = ts.length - 1; i >= 0; i--) d += `V${y(lower[i]!).toFixed(1)}H${x(ts[i - 1] ?? ts[i]!).toFixed(1)}`;
    return d + "Z";
  });
  return (
    <figure className="chart" ref={ref}>
      <figcaption>
        {props.title}
        {props.series.map((s) => (
          <span key={s.label} className="legend">
            <i style={{ background: s.color }} />
            {s.label}
          </span>
        ))}
      </figcaption>
      <svg viewBox={`0 0 ${W} ${h}`} height={h} role="img" aria-label={props.title}>
        <Grid W={W} h={h} y={y} ymax={ymax} yFormat={props.yFormat} windowS={props.windowS} />
        {areas.map((d, k) => (
          <path key={k} d={d} fill={props.series[k]!.color} stroke="none" />
        ))}
      </svg>
    </figure>
  );
}

/** Horizontal-free bar histogram with labels under each bar and counts above. */
export function Histogram(props: { title: string; labels: readonly string[]; counts: readonly number[]; colors?: readonly string[]; testId?: string }) {
  const max = Math.max(1, ...props.counts);
  const n = Math.max(1, props.counts.length);
  const bw = 100 / n;
  return (
    <figure className="chart histogram" data-testid={props.testId}>
      <figcaption>{props.title}</figcaption>
      <div className="bars">
        {props.counts.map((c, i) => (
          <div key={i} className="bar" style={{ width: `${bw}%` }} title={`${props.labels[i]}: ${c}`}>
            <span className="count">{c}</span>
            <div className="fill" style={{ height: `${(c / max) * 100}%`, background: props.colors?.[i] ?? "#4292c6" }} />
            <span className="label">{props.labels[i]}</span>
          </div>
        ))}
      </div>
    </figure>
  );
}
