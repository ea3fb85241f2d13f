/** A minimal typed event emitter that works the same in browsers and Node. */
export type EventMap = Record<string, unknown[]>;

export class Emitter<M extends EventMap> {
  readonly #handlers = new Map<keyof M, Set<unknown>>();

  /** Calls `handler` on every `event`; returns a function that unsubscribes it. */
  on<K extends keyof M>(event: K, handler: (...args: M[K]) => void): () => void {
    let set = this.#handlers.get(event);
    if (set === undefined) {
      set = new Set();
      this.#handlers.set(event, set);
    }
    set.add(handler);
    return () => set.delete(handler);
  }

  /** Calls the handlers of `event`; a throwing handler does not stop the others. */
  emit<K extends keyof M>(event: K, ...args: M[K]): void {
    const set = this.#handlers.get(event);
    if (set === undefined) return;
    for (const handler of [...set]) {
      try {
        (handler as (...a: M[K]) => void)(...args);
      } catch (error) {
        queueMicrotask(() => {
          throw error;
        });
      }
    }
  }
}
