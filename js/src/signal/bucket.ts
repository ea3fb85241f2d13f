/**
 * A token bucket: `rate` tokens a second, holding at most `burst`. A spend may be forced
 * past zero, leaving a debt (down to -burst) that refills before anything else is allowed.
 */
export class TokenBucket {
  readonly rate: number;
  readonly burst: number;
  #tokens: number;
  #refilledAt: number;

  constructor(rate: number, burst: number, now: number) {
    this.rate = rate;
    this.burst = burst;
    this.#tokens = burst;
    this.#refilledAt = now;
  }

  /** Tokens available at `now` (negative: a debt). */
  level(now: number): number {
    this.#tokens = Math.min(this.burst, this.#tokens + ((now - this.#refilledAt) / 1000) * this.rate);
    this.#refilledAt = now;
    return this.#tokens;
  }

  /** Takes `cost` if that many are there, or always when `force`; says whether it took them. */
  spend(cost: number, now: number, force = false): boolean {
    if (this.level(now) < cost && !force) return false;
    this.#tokens = Math.max(-this.burst, this.#tokens - cost);
    return true;
  }

  /** Milliseconds from `now` until the bucket is out of debt (0 when it is not in debt). */
  msUntilSolvent(now: number): number {
    const level = this.level(now);
    return level >= 0 || this.rate === 0 ? 0 : Math.ceil((-level / this.rate) * 1000);
  }
}
