/**
 * What the words on the page mean: the terms a visitor meets (partition, wire edge,
 * envelope, round, ...) and what each op of a compiled program does. Shown on hover (or
 * tap) wherever an element carries `data-term`.
 */

export interface Term {
  readonly title: string;
  readonly text: string;
}

export const TERMS: Readonly<Record<string, Term>> = {
  program: {
    title: 'Program',
    text: 'A Module written once for the whole federation, recorded as an ONNX model. The compiler cuts it into partitions, one per kind of peer, and every peer installs the same compiled artifact.',
  },
  partition: {
    title: 'Partition',
    text: 'The part of the program one kind of peer runs. Each box is a partition, coloured by the kind of peer that runs it; a peer may run several (a server runs the round loop and takes the updates).',
  },
  peerClass: {
    title: 'Peer class',
    text: 'A kind of peer the program names (server, clients, ...). Every peer of a class runs that class\'s partition.',
  },
  self: {
    title: '@self',
    text: 'The peer that starts the program: here the one whose loop drives the rounds (the server in federated averaging, every peer in gossip).',
  },
  wireEdge: {
    title: 'Wire edge',
    text: 'A value one partition sends to another: the compiler turned the program\'s network output into a wire.Send on one side and a wire.Recv on the other. Arrows are wire edges, labelled with what they carry.',
  },
  envelope: {
    title: 'Envelope',
    text: 'One message on the network: the bytes a wire.Send produces, addressed to one peer, carrying one or more values to the receiver\'s wire.Recv. Dots moving between peers are envelopes.',
  },
  round: {
    title: 'Round',
    text: 'One step of federated averaging: the server sends the global model, clients train it on their own data and send updates back, and the server averages them into the next global model.',
  },
  quorum: {
    title: 'Quorum',
    text: 'How many updates close a round once its deadline has passed. A round also closes at once when every client (the target) answered, so a slow or dead client does not stop the federation.',
  },
  binding: {
    title: 'Binding',
    text: 'A concrete component bound to a role slot of the program (model = CpuMlp, aggregator = FedAvg). A partition lists only the bindings it uses.',
  },
  gossip: {
    title: 'Gossip',
    text: 'No server: every peer trains, sends its model to a peer its view picks, and mixes in what it receives. Views themselves are exchanged between peers (grey dots, protocol messages) so that everyone keeps meeting new peers.',
  },
  protocol: {
    title: 'Protocol message',
    text: 'A message a component sends for itself rather than along a wire edge (grey dots): gossip peers swap parts of their views so the overlay keeps mixing; live clients announce themselves to the server\'s registry and keep their registration alive.',
  },
  heldOut: {
    title: 'Held-out accuracy',
    text: 'The share of test digits, never used for training, that the model reads correctly. Loss is the cross-entropy on the same digits.',
  },
  seat: {
    title: 'Seat',
    text: 'A client place in the live federation. A page that joins takes a seat; reloading keeps it; leaving gives it back after a short grace period.',
  },
};

/** What an op does, by `domain::op` (domain without the ai.bytesandbrains. prefix) or by role op. */
const OPS: Readonly<Record<string, string>> = {
  'wire::Send': 'Sends a value to other peers: each destination gets an envelope.',
  'wire::Recv': 'Where a value sent by another peer arrives; what follows runs when an envelope lands here.',
  'syscall::Interval': 'A timer: re-runs what follows it periodically (the round loop).',
  'syscall::DedupGateRx': 'Receive gate: drops an envelope delivered twice (a replay).',
  'syscall::PeerHealthGateRx': 'Receive gate: drops values from peers this node has blocked.',
  'syscall::BackoffGateRx': 'Receive gate: passes values that came from a peer.',
  'syscall::PeerHealthGateTx': 'Send gate: refuses to send to a blocked peer.',
  'syscall::BackoffGateTx': 'Send gate: refuses to send to a blocked peer.',
  'syscall::DeadlineCheck': 'Fails the send when the execution\'s deadline has passed; the envelope carries the time left.',
  'syscall::PassThrough': 'Hands a value on unchanged (to a program output).',
  'syscall::Sleep': 'Waits a while before passing its value on.',
  'syscall::After': 'Passes its value on after a delay.',
  'syscall::Constant': 'A constant value.',
  'composite::Bundle': 'Packs several values into one, so one envelope carries them together.',
  'composite::Unbundle': 'Unpacks a bundle into its values.',
  'Model.Fit': 'Trains the model locally: loads the parameters it got and runs SGD steps on batches of this peer\'s own data.',
  'Model.Evaluate': 'Scores the model on the test digits (held-out accuracy).',
  'Model.LoadParameters': 'Replaces the model\'s parameters (with the new global model).',
  'Model.Params': 'Reads the model\'s parameters.',
  'Model.Forward': 'Runs the model on a batch.',
  'Aggregator.Aggregate': 'Closes a round when enough updates arrived and produces the next global model and the round number.',
  'Aggregator.Contribute': 'Takes one update into the open round (only from peers the round was sent to).',
  'PeerSelector.Sample': 'Picks peers from this peer\'s current view.',
  'PeerSelector.CurrentView': 'The peers this peer currently knows.',
  'DataSource.NextBatch': 'The next batch of this peer\'s own data.',
  'Index.Search': 'Nearest neighbours of a query.',
};

/** Role names as the role domains spell them (ai.bytesandbrains.role.<name>). */
const ROLE_NAMES: Readonly<Record<string, string>> = {
  model: 'Model',
  aggregator: 'Aggregator',
  data_source: 'DataSource',
  peer_selector: 'PeerSelector',
  index: 'Index',
  codec: 'Codec',
  backend: 'Backend',
  protocol: 'Protocol',
};

const PREFIX = 'ai.bytesandbrains.';

/** The domain without the framework prefix; ONNX's default domain is ''. */
export function shortDomain(domain: string): string {
  return domain.startsWith(PREFIX) ? domain.slice(PREFIX.length) : domain;
}

/** The role of a role-domain op ("Model" for ai.bytesandbrains.role.model), else undefined. */
export function roleOf(domain: string): string | undefined {
  const short = shortDomain(domain);
  if (!short.startsWith('role.')) return undefined;
  const name = short.slice('role.'.length);
  return ROLE_NAMES[name] ?? name;
}

/** What an op does, in a sentence. */
export function explainOp(domain: string, opType: string): string {
  const role = roleOf(domain);
  if (role !== undefined) return OPS[`${role}.${opType}`] ?? `Calls ${opType} on the component bound to a ${role} slot.`;
  const short = shortDomain(domain);
  const known = OPS[`${short}::${opType}`];
  if (known !== undefined) return known;
  if (short === '' || short === 'ai.onnx') return `The ONNX operator ${opType}, run by the CPU backend.`;
  if (short.startsWith('protocol.')) return `A message of the ${short.slice('protocol.'.length)} protocol.`;
  return `${opType} (${domain}).`;
}
