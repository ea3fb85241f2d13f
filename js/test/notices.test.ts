/**
 * Nothing silent: what a newcomer gets wrong, each told in a line without subscribing to
 * anything (notices.ts), as the probes of the package found them:
 * - the digits example installed without `addPeer`: its rounds used to close empty with
 *   only a `peerResolveFailed` step; the example's start now adds its clients, and a node
 *   that cannot resolve a peer says so;
 * - a client with another model shape: the server says why it refuses the update, and
 *   the client is told (before: the server reported its untrained accuracy forever);
 * - NaN features: the client says its steps changed nothing, the server refuses the
 *   update that claims no samples and tells the client; OnnxTrainer.step names the value;
 * - a gossip peer with another model size: each peer it sends to refuses its model and
 *   tells it why (before: only the refusers counted it, and the peer never heard);
 * - 16 rows with 15 labels is said as such, not as rows of another width;
 * - the lines are rate-limited per kind and can be silenced.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { afterEach, beforeAll, beforeEach, describe, expect, test } from 'vitest';

import {
  componentModel,
  cpuMlp,
  Dataset,
  federatedAveraging,
  gossipLearning,
  loadBb,
  LocalNetwork,
  Notices,
  OnnxTrainer,
  onnxModel,
  peerIdFromU64,
  peersValue,
  roundReporter,
  setDefaultLogger,
  shortPeer,
  tensorValue,
  type Bb,
  type BbNode,
  type HostTensor,
  type ModelComponent,
  type RoundReport,
} from '../src/index.js';
import { compileFederatedDigits, installDigitsClient, installDigitsServer, startDigitsServer } from '../src/examples/index.js';
import { repoRoot, wasmBytes } from './support.js';

const MS = 1_000_000n;
let bb: Bb;
let lines: string[];

beforeAll(async () => {
  bb = await loadBb(wasmBytes());
});
beforeEach(() => {
  lines = [];
  setDefaultLogger({ warn: (line) => lines.push(line) });
});
afterEach(() => setDefaultLogger({ warn: (line) => console.warn(line) }));

/** Ten classes of 64 features that a small MLP separates (the pack test's synthetic digits). */
function digitsLike(rows: number, seed: number, poison = false): Dataset {
  let state = seed;
  const random = (): number => ((state = (state * 1103515245 + 12345) % 2147483648) / 2147483648);
  const x = new Float32Array(rows * 64);
  const y = new Float32Array(rows);
  for (let r = 0; r < rows; r++) {
    y[r] = r % 10;
    for (let j = 0; j < 64; j++) x[r * 64 + j] = ((j * 7 + (r % 10) * 13) % 10 < 5 ? 12 : 4) + (random() - 0.5) * 6;
  }
  if (poison) for (let r = 0; r < rows; r += 3) x[r * 64 + 5] = Number.NaN;
  return Dataset.fromArrays(bb, x, 64, y);
}

/** A model in TypeScript whose parameter vector is 700 floats long: its updates fit no 610-float federation. */
class Longer implements ModelComponent {
  params(): HostTensor<'float'> {
    return { dtype: 'float', dims: [700], data: new Float32Array(700) };
  }
  loadParameters(): void {}
  fit(): { trained: HostTensor<'float'>; samples: number } {
    return { trained: this.params(), samples: 32 };
  }
  evaluate(): number {
    return 0;
  }
}

function run(network: LocalNetwork, until: () => boolean, limitMs = 20_000): void {
  for (let t = 1n; t * 5n < BigInt(limitMs) && !until(); t++) network.poll(t * 5n * MS);
}

describe('the digits example, installed as its doc shows, without addPeer', () => {
  test('its rounds learn: starting the server adds its clients', () => {
    const artifact = compileFederatedDigits(bb, { quorum: 2, target: 2 });
    const test = digitsLike(100, 3);
    const serverId = peerIdFromU64(1);
    const ids = [peerIdFromU64(2), peerIdFromU64(3)];
    const server = installDigitsServer(bb, artifact, serverId, test);
    const network = new LocalNetwork([server, ...ids.map((id, k) => installDigitsClient(bb, artifact, id, serverId, digitsLike(150, k + 5)))]);
    let last: RoundReport = { round: 0, accuracy: 0 };
    server.onStep(roundReporter((report) => (last = report)));
    startDigitsServer(server, ids, test, 0n);
    run(network, () => last.round >= 8);
    expect(server.counter('fedavg.rounds_closed')).toBeGreaterThanOrEqual(7n);
    expect(last.accuracy).toBeGreaterThanOrEqual(0.9);
    expect(lines).toEqual([]);
    network.free();
  });

  test('a node sending to a peer it does not know says so', () => {
    const artifact = compileFederatedDigits(bb, { quorum: 1, target: 1 });
    const test = digitsLike(20, 3);
    const server = installDigitsServer(bb, artifact, peerIdFromU64(1), test);
    const stranger = peerIdFromU64(9);
    const x = test.features();
    const y = test.labels();
    // the inputs startDigitsServer gives, but the clients never added to the address book
    server.invoke('FedDigits', { clients: peersValue([stranger]), test_x: tensorValue('float', x.data, x.dims), test_y: tensorValue('float', y.data, y.dims) }, 0n);
    for (let t = 0n; t < 300n; t++) server.poll(t * 5n * MS);
    expect(lines.some((line) => line.includes(`could not send to ${stranger.slice(0, 10)}`) && line.includes('addPeer'))).toBe(true);
    server.free();
    test.free();
  });
});

describe('a federation a client gets wrong', () => {
  /** Runs the federation 3 s of its clock, or until `done` (then at most `ms`). */
  function federate(
    serverModel: ReturnType<typeof cpuMlp>,
    clientModel: ReturnType<typeof cpuMlp>,
    poisonLast = false,
    done: () => boolean = () => false,
    ms = 3000,
  ): { server: BbNode; client: BbNode; network: LocalNetwork } {
    const options = { clients: 2, quorum: 1, deadlineMs: 300 } as const;
    const serverPlan = federatedAveraging({ ...options, model: serverModel });
    const clientPlan = federatedAveraging({ ...options, model: clientModel });
    const serverArtifact = serverPlan.compile(bb);
    const clientArtifact = clientPlan.compile(bb);
    const server = serverPlan.installServer(bb, { artifact: serverArtifact, self: peerIdFromU64(1), test: digitsLike(50, 3), nowNs: 0n });
    const good = serverPlan.installClient(bb, { artifact: serverArtifact, self: peerIdFromU64(2), server: server.node.self, data: digitsLike(200, 4), nowNs: 0n });
    const client = clientPlan.installClient(bb, { artifact: clientArtifact, self: peerIdFromU64(3), server: server.node.self, data: digitsLike(200, 5, poisonLast), nowNs: 0n });
    const network = new LocalNetwork([server.node, good, client]);
    server.start([], 0n);
    run(network, done, ms);
    return { server: server.node, client, network };
  }

  test('another model shape: the client says why it cannot train the global model, once', () => {
    const { client, network } = federate(cpuMlp({ inputs: 64, hidden: [8], outputs: 10 }), cpuMlp({ inputs: 64, hidden: [16], outputs: 10 }));
    const mine = lines.filter((line) => line.includes(`node ${shortPeer(client.self)}`));
    // one line per kind within the interval, however many rounds it failed
    expect(mine, lines.join('\n')).toEqual([expect.stringMatching(/Fit failed: CpuMlp: parameters must be float32 \[1210\], got 610 floats/)]);
    network.free();
  });

  test('an update of another length: the server refuses it, says why, and tells the client', () => {
    // a client whose model is trained in TypeScript, with a parameter vector of its own length
    const { server, client, network } = federate(cpuMlp({ inputs: 64, hidden: [8], outputs: 10 }), componentModel('Longer', () => new Longer()) as ReturnType<typeof cpuMlp>);
    const reason = /an update of 700 parameters where the federation has 610|700 parameters where the federation has 610/;
    expect(lines.some((line) => line.includes(`node ${shortPeer(server.self)}`) && reason.test(line)), lines.join('\n')).toBe(true);
    expect(lines.some((line) => line.includes(`node ${shortPeer(client.self)}`) && line.includes('its contribution was refused') && reason.test(line)), lines.join('\n')).toBe(true);
    network.free();
  });

  test('NaN features: the client says its steps changed nothing, and hears that its update was refused', () => {
    const bytes = new Uint8Array(readFileSync(join(repoRoot, 'examples', 'models', 'digits_mlp.onnx')));
    const model = onnxModel(bytes, { optimizer: 'sgd', lr: 0.05, stepsPerRound: 3 });
    // the host reads the node's counters every 16 steps (or 250 ms of wall time); a refused
    // client is told once a second, so its rounds make few steps: run until both are said
    const skipped = /local training step\(s\) changed nothing: the loss or a gradient was not finite/;
    const refused = /its contribution was refused.*sample/;
    const clientId = peerIdFromU64(3);
    const mine = (): string[] => lines.filter((line) => line.includes(`node ${clientId.slice(0, 10)}`));
    const { client, network } = federate(model as ReturnType<typeof cpuMlp>, model as ReturnType<typeof cpuMlp>, true, () => mine().some((line) => skipped.test(line)) && mine().some((line) => refused.test(line)), 20_000);
    expect(client.self).toBe(clientId);
    expect(mine().some((line) => skipped.test(line)), lines.join('\n')).toBe(true);
    expect(mine().some((line) => refused.test(line)), lines.join('\n')).toBe(true);
    network.free();
  });
});

describe('a gossip peer a user gets wrong', () => {
  test('another model size: the peers it gossips with refuse its model and tell it why, and keep gossiping', () => {
    const options = { periodMs: 50, view: { size: 3, shuffle: 2 } } as const;
    const right = gossipLearning({ ...options, model: cpuMlp({ inputs: 64, outputs: 10 }) }); // 650 parameters
    const wrong = gossipLearning({ ...options, model: cpuMlp({ inputs: 64, hidden: [8], outputs: 10 }) }); // 610
    const ids = [1, 2, 3].map((i) => peerIdFromU64(i));
    const test = digitsLike(30, 3);
    const peers = ids.map((self, k) =>
      (k === 2 ? wrong : right).installPeer(bb, {
        artifact: (k === 2 ? wrong : right).compile(bb),
        self,
        data: digitsLike(60, k + 4),
        test,
        seeds: ids.filter((id) => id !== self),
        seed: k,
      }),
    );
    const confused = peers[2]!.node;
    const network = new LocalNetwork(peers.map((p) => p.node));
    for (const peer of peers) peer.start(0n);
    run(network, () => confused.counter('refusal_notice.received') >= 2n && peers[0]!.node.counter('gossip.merged') >= 2n, 5000);
    const mine = lines.filter((line) => line.includes(`node ${shortPeer(confused.self)}`));
    expect(
      mine.some((line) => /its contribution was refused by the peer it went to: GossipAvg: the update does not match the model's 650 parameters: it holds 610 float32 values/.test(line)),
      lines.join('\n'),
    ).toBe(true);
    expect(confused.counter('gossip.merged')).toBe(0n);
    expect(peers[0]!.node.counter('gossip.merged') + peers[1]!.node.counter('gossip.merged')).toBeGreaterThanOrEqual(2n);
    network.free();
  });
});

describe('OnnxTrainer, fed a bad batch', () => {
  const bytes = (): Uint8Array => new Uint8Array(readFileSync(join(repoRoot, 'examples', 'models', 'digits_mlp.onnx')));

  test('NaN features: the step says which value is not finite', () => {
    const trainer = OnnxTrainer.create(bb, bytes());
    const x = new Float32Array(4 * 64).fill(1);
    x[2 * 64 + 5] = Number.NaN;
    const result = trainer.step({ x, labels: new Float32Array([0, 1, 2, 3]) });
    expect(result.applied).toBe(false);
    expect(result.reason).toMatch(/not finite.*x\[row 2, value 5\] is NaN/);
    expect(lines.some((line) => line.includes('x[row 2, value 5] is NaN'))).toBe(true);
    trainer.free();
  });

  test('16 rows with 15 labels is said as such', () => {
    const trainer = OnnxTrainer.create(bb, bytes());
    // 15 rows of 64 pixels with 16 labels reach the engine as 16 rows of 60: said as what they are
    expect(() => trainer.step({ x: new Float32Array(15 * 64), labels: new Float32Array(16) })).toThrow(
      /x holds 15 rows of 64 values \(input pixels\), but 16 labels came with them: give one label per row/,
    );
    expect(() => trainer.step({ x: new Float32Array(16 * 62), labels: new Float32Array(16) })).toThrow(/992 values, which are not whole rows of 64/);
    expect(() => trainer.step({ x: new Float32Array(16 * 64), labels: new Float32Array(15) })).toThrow(/1024 values are not 15 rows: one label per row/);
    trainer.free();
  });
});

describe('the notices themselves', () => {
  test('one line per kind per interval, the rest counted into the next; silenced by false or a null default', () => {
    let now = 0;
    const said: string[] = [];
    const notices = new Notices({ warn: (line) => said.push(line) }, 10_000, () => now);
    for (let i = 0; i < 5; i++) notices.notice('a', `a ${i}`);
    notices.notice('b', 'b 0');
    now = 10_000;
    notices.notice('a', 'a 5');
    expect(said).toEqual(['bytesandbrains: a 0', 'bytesandbrains: b 0', 'bytesandbrains: a 5 (and 4 more like it since the last such line)']);

    const quiet = new Notices(false);
    quiet.notice('a', 'never');
    setDefaultLogger(null);
    new Notices(undefined).notice('a', 'never');
    expect(lines).toEqual([]);
  });
});
