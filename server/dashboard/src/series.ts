// Fixed-capacity ring buffer of samples sharing one time axis. Viewer histories are kept for
// every viewer (1,000+), so storage is typed arrays sized once, never growing arrays of objects.

export class Ring<K extends string> {
  readonly capacity: number;
  readonly keys: readonly K[];
  private readonly t: Float64Array;
  private readonly cols: Record<K, Float64Array>;
  private head = 0; // index of the oldest sample
  private n = 0;

  constructor(capacity: number, keys: readonly K[]) {
    this.capacity = capacity;
    this.keys = keys;
    this.t = new Float64Array(capacity);
    this.cols = {} as Record<K, Float64Array>;
    for (const k of keys) this.cols[k] = new Float64Array(capacity);
  }

  get length(): number {
    return this.n;
  }

  push(t: number, values: Partial<Record<K, number>>): void {
    const idx = (this.head + this.n) % this.capacity;
    this.t[idx] = t;
    for (const k of this.keys) this.cols[k][idx] = values[k] ?? NaN;
    if (this.n < this.capacity) this.n++;
    else this.head = (this.head + 1) % this.capacity;
  }

  lastTime(): number | undefined {
    return this.n === 0 ? undefined : this.t[(this.head + this.n - 1) % this.capacity];
  }

  last(k: K): number | undefined {
    return this.n === 0 ? undefined : this.cols[k][(this.head + this.n - 1) % this.capacity];
  }

  /** Time axis, oldest first. */
  times(): number[] {
    const out = new Array<number>(this.n);
    for (let i = 0; i < this.n; i++) out[i] = this.t[(this.head + i) % this.capacity]!;
    return out;
  }

  /** One column, oldest first (NaN marks a gap or a missing value). */
  values(k: K): number[] {
    const col = this.cols[k];
    const out = new Array<number>(this.n);
    for (let i = 0; i < this.n; i++) out[i] = col[(this.head + i) % this.capacity]!;
    return out;
  }
}
