// Windowing for the viewer list: only rows intersecting the viewport (plus overscan) are in the
// DOM, so 1,000+ viewers cost a few dozen rows of layout per second.
export interface VirtualWindow {
  start: number; // first rendered index (inclusive)
  end: number; // last rendered index (exclusive)
  offsetTop: number; // px offset of row `start`
  totalHeight: number;
}

export function virtualWindow(
  count: number,
  rowHeight: number,
  scrollTop: number,
  viewportHeight: number,
  overscan = 6,
): VirtualWindow {
  const totalHeight = Math.max(0, count * rowHeight);
  if (count <= 0 || rowHeight <= 0) return { start: 0, end: 0, offsetTop: 0, totalHeight };
  const maxScroll = Math.max(0, totalHeight - viewportHeight);
  const top = Math.min(Math.max(0, scrollTop), maxScroll);
  const first = Math.floor(top / rowHeight);
  const visible = Math.ceil(Math.max(0, viewportHeight) / rowHeight) + 1;
  const start = Math.max(0, first - overscan);
  const end = Math.min(count, first + visible + overscan);
  return { start, end, offsetTop: start * rowHeight, totalHeight };
}
