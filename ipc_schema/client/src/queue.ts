/** A push-fed async iterator: the one shape behind stream lines and resource events. */
export class AsyncQueue<T> implements AsyncIterableIterator<T> {
  private readonly items: T[] = [];
  private waiters: { resolve: (r: IteratorResult<T>) => void; reject: (e: unknown) => void }[] = [];
  private ended = false;
  private failure: { error: unknown } | null = null;

  /** `onReturn` runs when the consumer stops early (`break`, `return()`), not when the queue ends by itself. */
  constructor(private readonly onReturn?: () => void) {}

  get done(): boolean {
    return this.ended;
  }

  push(value: T): void {
    if (this.ended) return;
    const waiter = this.waiters.shift();
    if (waiter) waiter.resolve({ value, done: false });
    else this.items.push(value);
  }

  /** No more values; with `error`, the consumer gets it after the values already queued. */
  end(error?: unknown): void {
    if (this.ended) return;
    this.ended = true;
    if (error !== undefined) this.failure = { error };
    if (this.items.length) return; // no waiter can be parked while items are queued
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) this.settleEnded(w.resolve, w.reject);
  }

  next(): Promise<IteratorResult<T>> {
    if (this.items.length) return Promise.resolve({ value: this.items.shift() as T, done: false });
    if (this.ended) return new Promise((resolve, reject) => this.settleEnded(resolve, reject));
    return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }));
  }

  return(): Promise<IteratorResult<T>> {
    const early = !this.ended;
    this.items.length = 0;
    this.failure = null;
    this.end();
    if (early) this.onReturn?.();
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<T> {
    return this;
  }

  private settleEnded(resolve: (r: IteratorResult<T>) => void, reject: (e: unknown) => void): void {
    const failure = this.failure;
    this.failure = null; // thrown once; afterwards the iterator is simply done
    if (failure) reject(failure.error);
    else resolve({ value: undefined, done: true });
  }
}
