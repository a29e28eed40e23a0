// Hypervisor steal: the share of a vCPU's time the host gave to someone else (`/proc/stat`).
// While the host has descheduled a vCPU nothing on it runs, so no timer fires, no emulator
// releases a packet and no tbf watchdog dequeues one: timing measured over such a window
// measures the host, not our code (docs/testbed.md "Players per machine", session 7).
import fs from 'node:fs';

/** Per-CPU (steal, total) jiffies from /proc/stat; null if unreadable. */
export function cpuSteal(): { steal: number; total: number }[] | null {
  try {
    return fs
      .readFileSync('/proc/stat', 'utf8')
      .split('\n')
      .filter((l) => /^cpu\d+ /.test(l))
      .map((l) => {
        const v = l.trim().split(/\s+/).slice(1).map(Number);
        // user nice system idle iowait irq softirq steal (guest time is inside user)
        return { steal: v[7] ?? 0, total: v.slice(0, 8).reduce((a, b) => a + b, 0) };
      });
  } catch {
    return null;
  }
}

/** Steal between two `cpuSteal` readings, % of each CPU's time. */
export function stealBetween(a: ReturnType<typeof cpuSteal>, b: ReturnType<typeof cpuSteal>): number[] | null {
  if (!a || !b || a.length !== b.length) return null;
  return a.map((x, i) => {
    const dt = b[i].total - x.total;
    return dt > 0 ? (100 * (b[i].steal - x.steal)) / dt : 0;
  });
}
