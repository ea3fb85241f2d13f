/**
 * Nodes of one process (or one page) as a network: what a node sends is handed to the
 * addressed node at the next poll, with no transport in between. A Pollable, so a
 * PollDriver can run a whole federation in a page; tests step it with their own clock.
 */
import type { Pollable } from './driver.js';
import type { BbNode, Step } from './node.js';
import { Notices, type Logger } from './notices.js';

export interface LocalNetworkOptions {
  /** Every step but sends, with the node it came from. */
  readonly onStep?: (from: string, step: Step) => void;
  /** Each envelope as it is delivered. */
  readonly onDeliver?: (to: string, from: string, bytes: Uint8Array) => void;
  /** Where an envelope to a peer outside the network is told of (default: the default logger; false: nowhere). */
  readonly log?: Logger | false;
}

export class LocalNetwork implements Pollable {
  readonly #nodes = new Map<string, BbNode>();
  readonly #inbox: { to: string; from: string; bytes: Uint8Array }[] = [];
  readonly #options: LocalNetworkOptions;
  readonly #workListeners = new Set<() => void>();
  readonly #notices: Notices;
  /** Envelopes addressed to a peer that is not in this network. */
  dropped = 0;

  constructor(nodes: Iterable<BbNode> = [], options: LocalNetworkOptions = {}) {
    this.#options = options;
    this.#notices = new Notices(options.log);
    for (const node of nodes) this.add(node);
  }

  add(node: BbNode): void {
    const from = node.self;
    this.#nodes.set(from, node);
    node.onStep((step) => {
      if (step.kind === 'send') this.#inbox.push({ to: step.peer!, from, bytes: step.bytes! });
      else this.#options.onStep?.(from, step);
    });
    node.onWork(() => {
      for (const listener of [...this.#workListeners]) listener();
    });
  }

  /** Calls `listener` when a node of the network is given work outside a poll (BbNode.onWork). */
  onWork(listener: () => void): () => void {
    this.#workListeners.add(listener);
    return () => this.#workListeners.delete(listener);
  }

  get nodes(): ReadonlyMap<string, BbNode> {
    return this.#nodes;
  }

  /** Delivers what was sent since the last poll, then polls every node. */
  poll(nowNs: bigint): void {
    for (const { to, from, bytes } of this.#inbox.splice(0)) {
      const node = this.#nodes.get(to);
      if (node === undefined || node.freed) {
        this.dropped++;
        this.#notices.notice('local-drop', `LocalNetwork: an envelope from ${from} to ${to}, which is not in the network${node === undefined ? '' : ' any more'}, was dropped`);
        continue;
      }
      node.deliver(from, bytes, nowNs);
      this.#options.onDeliver?.(to, from, bytes);
    }
    for (const node of this.#nodes.values()) if (!node.freed) node.poll(nowNs);
  }

  expiry(): bigint | null {
    let next: bigint | null = null;
    for (const node of this.#nodes.values()) {
      const at = node.freed ? null : node.expiry();
      if (at !== null && (next === null || at < next)) next = at;
    }
    return next;
  }

  hasWork(): boolean {
    return this.#inbox.length > 0 || [...this.#nodes.values()].some((node) => !node.freed && node.hasWork());
  }

  /** Frees every node. */
  free(): void {
    for (const node of this.#nodes.values()) node.free();
  }
}
