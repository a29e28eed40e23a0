// Reconnect delays for /api/live: exponential from 0.5 s, capped at 15 s, with "equal jitter"
// (half fixed, half random) so a thousand open dashboards do not reconnect in lock-step after a
// server restart. `random` is injectable for tests.
export const BACKOFF_BASE_MS = 500;
export const BACKOFF_MAX_MS = 15_000;

export function backoffDelay(attempt: number, random: () => number = Math.random): number {
  const exp = Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** Math.max(0, Math.min(attempt, 30)));
  return exp / 2 + (exp / 2) * random();
}
