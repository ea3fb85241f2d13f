/**
 * A node, a transport and a PollDriver wired together: what a page or a Node process runs
 * to be a peer. Envelopes the node sends go to the transport; envelopes that arrive are
 * delivered (and wake the driver); the driver polls on animation frames while the page is
 * visible, on timers otherwise, and sleeps until the node's next deadline.
 *
 * ```ts
 * const transport = await WebRtcTransport.create({ signal: await SignalClient.connect({ url, room, peer: node.self }) });
 * const peer = runPeer(node, transport, { onStep: (step) => show(step) });
 * ```
 */
import { PollDriver, type PollDriverOptions } from './driver.js';
import type { BbNode, Step } from './node.js';
import type { Transport } from './transport/types.js';

export interface PeerOptions extends PollDriverOptions {
  /** Every step but sends (which go to the transport). */
  readonly onStep?: (step: Step) => void;
  /** An envelope the node refused or the transport could not take (the protocol's deadlines cover the loss). */
  readonly onDrop?: (error: unknown, peer: string, direction: 'in' | 'out') => void;
}

export interface PeerStats {
  readonly sent: number;
  readonly received: number;
  readonly droppedOut: number;
  readonly droppedIn: number;
}

export interface RunningPeer {
  readonly node: BbNode;
  readonly transport: Transport;
  readonly driver: PollDriver;
  stats(): PeerStats;
  /** Stops the driver and unhooks the node from the transport (neither is freed or closed). */
  stop(): void;
}

export function runPeer(node: BbNode, transport: Transport, options: PeerOptions = {}): RunningPeer {
  const driver = new PollDriver(node, options);
  const counts = { sent: 0, received: 0, droppedOut: 0, droppedIn: 0 };
  const unStep = node.onStep((step) => {
    if (step.kind !== 'send') {
      options.onStep?.(step);
      return;
    }
    try {
      transport.send(step.peer!, step.bytes!);
      counts.sent++;
    } catch (error) {
      counts.droppedOut++;
      options.onDrop?.(error, step.peer!, 'out');
    }
  });
  const unEnvelope = transport.onEnvelope((from, bytes) => {
    try {
      node.deliver(from, bytes, driver.now());
      counts.received++;
    } catch (error) {
      counts.droppedIn++;
      options.onDrop?.(error, from, 'in');
    }
    driver.wake();
  });
  driver.start();
  return {
    node,
    transport,
    driver,
    stats: () => ({ ...counts }),
    stop() {
      driver.stop();
      unStep();
      unEnvelope();
    },
  };
}
