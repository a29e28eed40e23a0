export function fmtBps(bps: number | null | undefined): string {
  if (bps === null || bps === undefined || !Number.isFinite(bps)) return "–";
  const a = Math.abs(bps);
  if (a >= 1e9) return (bps / 1e9).toFixed(2) + " Gb/s";
  if (a >= 1e6) return (bps / 1e6).toFixed(a >= 1e7 ? 1 : 2) + " Mb/s";
  if (a >= 1e3) return (bps / 1e3).toFixed(a >= 1e5 ? 0 : 1) + " kb/s";
  return Math.round(bps) + " b/s";
}

export function fmtPct(r: number | null | undefined, digits = 1): string {
  if (r === null || r === undefined || !Number.isFinite(r)) return "–";
  return (r * 100).toFixed(digits) + "%";
}

export function fmtCount(n: number): string {
  if (!Number.isFinite(n)) return "–";
  if (n >= 1e9) return (n / 1e9).toFixed(2) + "G";
  if (n >= 1e6) return (n / 1e6).toFixed(2) + "M";
  if (n >= 1e4) return (n / 1e3).toFixed(1) + "k";
  return String(Math.round(n));
}

export function fmtBytes(n: number): string {
  if (!Number.isFinite(n)) return "–";
  if (n >= 1e9) return (n / 1e9).toFixed(2) + " GB";
  if (n >= 1e6) return (n / 1e6).toFixed(1) + " MB";
  if (n >= 1e3) return (n / 1e3).toFixed(1) + " kB";
  return n + " B";
}

export function fmtDuration(s: number): string {
  if (!Number.isFinite(s) || s < 0) return "–";
  if (s < 60) return Math.floor(s) + "s";
  if (s < 3600) return Math.floor(s / 60) + "m " + Math.floor(s % 60) + "s";
  return Math.floor(s / 3600) + "h " + Math.floor((s % 3600) / 60) + "m";
}

export function fmtClock(unix: number): string {
  if (!Number.isFinite(unix) || unix <= 0) return "–";
  return new Date(unix * 1000).toISOString().slice(11, 19);
}

export function fmtRes(w: number, h: number): string {
  return w > 0 && h > 0 ? `${w}×${h}` : "–";
}
