/**
 * Which partitions one peer runs together. An artifact says which peer class runs each
 * partition, but not which classes share a peer: that is the host's choice when it installs
 * a node with several targets. For the programs whose hosts this page knows, the package's
 * templates and the C examples, the picture draws each such peer as one box around its
 * partitions (federated_digits' server runs FedDigits and FedDigits_server); any other
 * artifact is drawn partition by partition, with no claim about who runs what together.
 */
import { FEDERATED_CNN_CLIENT_TARGETS, FEDERATED_CNN_SERVER_TARGETS, FEDERATED_DIGITS_CLIENT_TARGETS, FEDERATED_DIGITS_SERVER_TARGETS } from 'bytesandbrains/examples';

import { LIVE_MODULE, livePlan } from '../../shared/live-plan.js';
import { SPLIT_MODULE } from './split.js';

/** One kind of peer: what it is called and the partitions (by title) it installs. */
export interface PeerKind {
  /** "server", "edge", "client" */
  readonly peer: string;
  readonly titles: readonly string[];
}

const live = livePlan({ clients: 1, quorum: 1, deadlineMs: 1000, registryTtlMs: 5000 });

/** By the @self partition's title (the Module's name). */
const KNOWN: Readonly<Record<string, readonly PeerKind[]>> = {
  FedDigits: [
    { peer: 'server', titles: FEDERATED_DIGITS_SERVER_TARGETS },
    { peer: 'client', titles: FEDERATED_DIGITS_CLIENT_TARGETS },
  ],
  FedCnn: [
    { peer: 'server', titles: FEDERATED_CNN_SERVER_TARGETS },
    { peer: 'client', titles: FEDERATED_CNN_CLIENT_TARGETS },
  ],
  [LIVE_MODULE]: [
    { peer: 'server', titles: live.serverTargets },
    { peer: 'client', titles: live.clientTargets },
  ],
  // examples/programs/hierarchical_digits.c installs these (ROOT, EDGE, CLIENT)
  HierDigits: [
    { peer: 'root', titles: ['HierDigits', 'HierDigits_root'] },
    { peer: 'edge', titles: ['HierDigits_edges', 'HierDigits_edge'] },
    { peer: 'client', titles: ['HierDigits_clients'] },
  ],
  GossipDigits: [{ peer: 'peer', titles: ['GossipDigits'] }],
  // the splitLearning template's SplitFed plan (split_cnn's third Module)
  [SPLIT_MODULE]: [
    { peer: 'server', titles: [`${SPLIT_MODULE}_server`] },
    { peer: 'client', titles: [SPLIT_MODULE, `${SPLIT_MODULE}_clients`] },
  ],
};

/** The kinds of peer of a program, when its host is known and installs every partition listed. */
export function peerKindsOf(module: string, titles: readonly string[]): readonly PeerKind[] | undefined {
  const kinds = KNOWN[module];
  if (kinds === undefined || !kinds.every((k) => k.titles.every((t) => titles.includes(t)))) return undefined;
  return kinds;
}
