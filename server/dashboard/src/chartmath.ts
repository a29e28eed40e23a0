// Pure helpers for the hand-rolled SVG charts (tested in test/unit).

/** A "nice" upper bound for an axis: 1, 2, 2.5 or 5 times a power of ten, >= max. */
export function niceMax(max: number): number {
  if (!Number.isFinite(max) || max <= 0) return 1;
  const p = 10 ** Math.floor(Math.log10(max));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= max * (1 - 1e-9)) return m * p;
  return 10 * p;
}

/**
 * SVG path for one series. NaN values break the line (gaps, missing estimates). With `step`,
 * the value holds until the next sample (layer counts are piecewise constant).
 */
export function linePath(
  ts: readonly number[],
  vs: readonly number[],
  x: (t: number) => number,
  y: (v: number) => number,
  step = false,
): string {
  let d = "";
  let pen = false;
  for (let i = 0; i < ts.length; i++) {
    const v = vs[i]!;
    if (!Number.isFinite(v)) {
      pen = false;
      continue;
    }
    const px = x(ts[i]!).toFixed(1);
    const py = y(v).toFixed(1);
    if (!pen) d += `M${px},${py}`;
    else if (step) d += `H${px}V${py}`;
    else d += `L${px},${py}`;
    pen = true;
  }
  return d;
}

/** Cumulative stacks for a stacked area chart: out[k][i] = sum of series 0..k at sample i. */
export function stack(series: readonly (readonly number[])[]): number[][] {
  const out: number[][] = [];
  let acc: number[] | null = null;
  for (const s of series) {
    const cur = s.map((v, i) => (Number.isFinite(v) ? v : 0) + (acc ? acc[i]! : 0));
    out.push(cur);
    acc = cur;
  }
  return out;
}
