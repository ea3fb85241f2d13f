/**
 * One peer of the in-page federation, in its own Web Worker: its own bb.wasm instance, its
 * node and a PollDriver on timers. Envelopes go out to the page and come in from it.
 */
import {
  Dataset,
  loadBb,
  PollDriver,
  splitLearning,
  type BbNode,
  type GossipPeer,
  type SplitServer,
} from 'bytesandbrains';
import { gossipDigits, installDigitsClient, installDigitsServer, startDigitsServer } from 'bytesandbrains/examples';

import { splitPlanOptions } from '../program/split.js';

import { roundCounters } from '../../shared/rounds.js';
import type { FromWorker, InitMessage, ToWorker } from './protocol.js';

const scope = self as unknown as { postMessage(message: FromWorker, transfer?: Transferable[]): void; onmessage: ((event: MessageEvent<ToWorker>) => void) | null };
const post = (message: FromWorker, transfer: Transferable[] = []): void => scope.postMessage(message, transfer);

let node: BbNode | undefined;
let gossip: GossipPeer | undefined;
let splitServer: SplitServer | undefined;
/** A split client starts its steps when the page says the server knows its clients. */
let startSplitClient: ((nowNs: bigint) => void) | undefined;
let driver: PollDriver | undefined;
/** The held-out digits (the server starts its rounds with them). */
let test: Dataset | undefined;
/** Messages that came before the node was installed. */
const early: ToWorker[] = [];

async function init(message: InitMessage): Promise<void> {
  const bb = await loadBb(message.module);
  const all = Dataset.fromCsv(bb, message.csv);
  test = all.subset(message.test);
  const mine = all.subset(message.rows);
  if (message.role === 'server') {
    node = installDigitsServer(bb, message.artifact, message.self, test, message.seed);
  } else if (message.role === 'client') {
    node = installDigitsClient(bb, message.artifact, message.self, message.server!, mine, message.seed);
  } else if (message.role === 'split-server' || message.role === 'split-client') {
    const split = message.split!;
    const plan = splitLearning(splitPlanOptions(split.clients));
    if (message.role === 'split-server') {
      splitServer = plan.installServer(bb, { artifact: message.artifact, model: split.model, self: message.self, seed: message.seed });
      node = splitServer.node;
    } else {
      const client = plan.installClient(bb, { artifact: message.artifact, model: split.model, self: message.self, server: message.server!, data: mine, test, seed: message.seed });
      node = client.node;
      startSplitClient = (nowNs) => client.start(nowNs);
    }
  } else {
    // a gossip peer: its first view is the next two peers; it scores itself on the test set
    const index = message.peers.indexOf(message.self);
    const seeds = [1, 2].map((k) => message.peers[(index + k) % message.peers.length]!).filter((p) => p !== message.self);
    gossip = gossipDigits.installPeer(bb, { artifact: message.artifact, self: message.self, data: mine, test, seeds, seed: message.seed });
    node = gossip.node;
    for (const peer of message.peers) if (peer !== message.self) node.addPeer(peer);
  }
  const installed = node;
  installed.onStep((step) => {
    if (step.kind === 'send') {
      const bytes = step.bytes!;
      post({ type: 'send', to: step.peer!, bytes }, [bytes.buffer]);
    } else if (step.kind === 'appEvent' && step.topic !== undefined && step.value !== undefined) {
      // the counters after this poll say whether the aggregator closed or abandoned a round
      post({ type: 'event', topic: step.topic, value: step.value, ...(step.topic === 'round' ? { counters: roundCounters(installed) } : {}) });
    } else if (step.kind === 'opFailed' || step.kind === 'wireReceiveFailed' || step.kind === 'outboundDropped' || step.kind === 'ingressDropped' || step.kind === 'peerResolveFailed') {
      post({ type: 'failure', kind: step.kind, ...(step.reason === undefined ? {} : { reason: step.reason }), ...(step.detail === undefined ? {} : { detail: step.detail }) });
    }
  });
  driver = new PollDriver(installed, { requestAnimationFrame: null, visibility: null, onError: (error) => post({ type: 'error', message: String(error) }) });
  gossip?.start(driver.now());
  driver.start();
  post({ type: 'ready' });
  for (const m of early.splice(0)) handle(m);
}

function handle(message: ToWorker): void {
  if (message.type === 'init') {
    init(message).catch((error: unknown) => post({ type: 'error', message: error instanceof Error ? error.message : String(error) }));
    return;
  }
  if (node === undefined || driver === undefined) {
    early.push(message);
    return;
  }
  switch (message.type) {
    case 'start':
      if (startSplitClient !== undefined) startSplitClient(driver.now());
      else if (splitServer !== undefined) splitServer.start(message.clients);
      else {
        for (const client of message.clients) node.addPeer(client);
        startDigitsServer(node, message.clients, test!, driver.now());
      }
      driver.wake();
      break;
    case 'deliver':
      try {
        node.deliver(message.from, message.bytes, driver.now());
        post({ type: 'delivered', flight: message.flight, ok: true });
      } catch (error) {
        post({ type: 'delivered', flight: message.flight, ok: false, error: error instanceof Error ? error.message : String(error) });
      }
      driver.wake();
      break;
    case 'pause':
      driver.stop();
      break;
    case 'resume':
      driver.start();
      break;
  }
}

scope.onmessage = (event) => handle(event.data);
