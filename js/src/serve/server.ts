/**
 * `bytesandbrains serve`: a federated-averaging server from a config, no code. One process
 * is the signalling server its clients meet at, the server peer (over node-datachannel)
 * and an HTTP endpoint telling how the federation goes:
 * - GET /status: JSON (the round, accuracy, room, refusals, the last rounds, what was written);
 * - GET /metrics: the same as Prometheus text;
 * - GET /plan.json and /model.onnx: what a client needs to build the same plan (servedPlan).
 * It prints a line per round, writes the global model as ONNX and checkpoints of its whole
 * state whole-or-not-at-all, and goes on from a checkpoint after a crash.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';

import type { Bb } from '../engine/bb.js';
import { Dataset } from '../train/dataset.js';
import { loadBb } from '../engine/loader.js';
import { OnnxModel } from '../engine/model.js';
import { monotonicNowNs } from '../node/node.js';
import { connectPeer, type RunningPeer } from '../node/peer.js';
import { OnnxTrainer } from '../train/trainer.js';
import { fromBase64 } from '../identity/bytes.js';
import { loadIdentityFile } from '../identity/file.js';
import type { WebSocketConstructor } from '../signal/client.js';
import { SignalServer, type SignalServerOptions } from '../signal/server.js';
import { majorityOf } from '../templates/federated.js';
import type { Refusals, RoundReport, ServerNode } from '../templates/plan.js';
import { servedPlan, type ServedPlan } from '../templates/served.js';
import { readCheckpoint, writeFileAtomic, encodeCheckpoint } from './checkpoint.js';
import type { ServeConfig } from './config.js';

/** A mistake in what the server was given (a model, a test set, a checkpoint): the message says which. */
export class ServeError extends Error {
  override readonly name = 'ServeError';
}

const BUILTIN_MODELS: Readonly<Record<string, string>> = { 'digits-mlp': 'digits_mlp.onnx', 'digits-cnn': 'digits_cnn.onnx' };

export interface RunningServer {
  /** Where clients join (ws: or wss:) and where /status answers (http: or https:). */
  readonly signalUrl: string;
  readonly httpUrl: string;
  readonly serverId: string;
  /** Resolves with the last round's accuracy once `rounds` rounds ran (never without `rounds`). */
  readonly finished: Promise<number>;
  /** Writes a last checkpoint (when configured) and stops everything. */
  stop(): Promise<void>;
}

interface RoundLine extends RoundReport {
  readonly at: string;
}

function readModel(config: ServeConfig): Uint8Array {
  const builtin = /^builtin:(.*)$/.exec(config.model)?.[1];
  if (builtin !== undefined && !(builtin in BUILTIN_MODELS)) {
    throw new ServeError(`--model ${config.model}: no such built-in model (there are ${Object.keys(BUILTIN_MODELS).map((n) => `builtin:${n}`).join(', ')})`);
  }
  const path = builtin === undefined ? config.model : new URL(`../../models/${BUILTIN_MODELS[builtin]}`, import.meta.url);
  try {
    return new Uint8Array(readFileSync(path));
  } catch (error) {
    throw new ServeError(`--model ${config.model}: ${(error as Error).message}`);
  }
}

/** The model's bytes decode, train with the options and score the test set, or the run stops here saying why. */
function checkModel(bb: Bb, config: ServeConfig, bytes: Uint8Array, test: Dataset, training: ServedPlan['training']): void {
  try {
    OnnxModel.decode(bb, bytes).free();
  } catch (error) {
    throw new ServeError(`--model ${config.model} is not an ONNX model: ${(error as Error).message}`);
  }
  let trainer: OnnxTrainer;
  try {
    const { batch: _batch, stepsPerRound: _steps, ...options } = training;
    trainer = OnnxTrainer.create(bb, bytes, options);
  } catch (error) {
    throw new ServeError(`--model ${config.model} cannot be trained so: ${(error as Error).message}`);
  }
  try {
    const x = test.features();
    const y = test.labels();
    trainer.evaluate(x.data as Float32Array, y.data as Float32Array);
  } catch (error) {
    throw new ServeError(`--test ${config.test} does not fit --model ${config.model}: ${(error as Error).message}`);
  } finally {
    trainer.free();
  }
}

function readTest(bb: Bb, config: ServeConfig): Dataset {
  let bytes: Uint8Array;
  try {
    bytes = new Uint8Array(readFileSync(config.test));
  } catch (error) {
    throw new ServeError(`--test ${config.test}: ${(error as Error).message}`);
  }
  try {
    const test = Dataset.fromCsv(bb, bytes, { labelColumn: config.labelColumn, header: config.header });
    if (test.rows === 0) throw new Error('it holds no rows');
    return test;
  } catch (error) {
    throw new ServeError(`--test ${config.test} is not a CSV of numbers with a label column: ${(error as Error).message}`);
  }
}

/** What the federation's clients need to build the same plan. */
function describePlan(config: ServeConfig): ServedPlan {
  const training: Record<string, unknown> = {};
  for (const key of ['optimizer', 'lr', 'loss', 'batch', 'stepsPerRound'] as const) if (config[key] !== undefined) training[key] = config[key];
  if (config.freeze.length > 0) training['freeze'] = config.freeze;
  return {
    template: 'federatedAveraging',
    name: config.name,
    clients: config.clients,
    // a secure sum holds at least 3 updates: rounds wait for that many
    quorum: config.quorum ?? (config.secure === undefined ? majorityOf(config.clients) : Math.max(3, majorityOf(config.clients))),
    deadlineMs: config.deadlineMs,
    roundMs: config.roundMs,
    training,
    ...(config.dp === undefined ? {} : { dp: config.dp }),
    ...(config.secure === undefined ? {} : { secure: config.secure }),
  };
}

function operatorKeys(config: ServeConfig): Uint8Array[] {
  return config.operators.map((text) => {
    const key = fromBase64(text);
    if (key === null || key.length !== 32) throw new ServeError(`--operator ${text} is not a 32-byte Ed25519 public key in base64url (bytesandbrains-token makes one)`);
    return key;
  });
}

/** Signalling: the federation's room admits the server and token holders when there are operators, else anyone (open). */
function signalOptions(config: ServeConfig, serverId: string, operators: readonly Uint8Array[]): SignalServerOptions {
  const options: SignalServerOptions = { openRooms: !config.closed };
  if (operators.length > 0) options.rooms = { [config.room]: { allow: { [serverId]: 'server' }, operators } };
  const turnUrls = config.iceServers.filter((url) => /^turns?:/.test(url));
  options.iceServers = config.iceServers.filter((url) => !/^turns?:/.test(url)).map((urls) => ({ urls }));
  if (config.turnSecret !== undefined) options.turn = { secret: config.turnSecret, urls: turnUrls, ttlSeconds: 3600 };
  return options;
}

/** Counters of what was refused, the non-zero ones, as text. */
function refusalText(refusals: Refusals): string {
  const parts = Object.entries(refusals).filter(([, n]) => n > 0).map(([reason, n]) => `${n} ${reason}`);
  return parts.length === 0 ? '' : `; left out or refused so far: ${parts.join(', ')}`;
}

/** The privacy spent so far, as text ('' without differential privacy). */
function privacyText(report: RoundReport, config: ServeConfig): string {
  if (report.epsilon === undefined || config.dp === undefined) return '';
  const sampled = config.dp.sampleRate === undefined ? '' : ` (q ${config.dp.sampleRate})`;
  return `; privacy spent: ε ${report.epsilon.toPrecision(4)} at δ ${config.dp.delta}${sampled}`;
}

/** How many updates the round's secure sum held, as text ('' without secure aggregation). */
function secureText(report: RoundReport): string {
  if (report.secure === undefined || report.round === 0) return ''; // round 0 is the initial model
  return report.secure.summed === 0 ? '; no secure sum (the round was abandoned)' : `; a secure sum of ${report.secure.summed}`;
}

/** Starts the server the config describes; `say` gets its lines (a line per round). */
export async function serve(config: ServeConfig, say: (line: string) => void): Promise<RunningServer> {
  const bb = await loadBb();
  const model = readModel(config);
  const test = readTest(bb, config);
  const description = describePlan(config);
  checkModel(bb, config, model, test, description.training);
  const operators = operatorKeys(config);
  if (config.closed && operators.length === 0) throw new ServeError('--closed refuses rooms without a policy, and the room has one only with --operator: give an operator key');
  const plan = servedPlan(description, model);
  const planDigest = createHash('sha256').update(model).update(JSON.stringify(description)).digest('hex');
  const artifact = plan.compile(bb);
  const identity = await loadIdentityFile(config.key);

  const resumed = config.resume === undefined ? undefined : readCheckpoint(config.resume);
  if (resumed !== undefined) {
    if (resumed.header.server !== identity.peerId) {
      throw new ServeError(`--resume ${config.resume} was written by server ${resumed.header.server}, not by this --key (${identity.peerId})`);
    }
    if (resumed.header.plan !== planDigest) throw new ServeError(`--resume ${config.resume} was written with another model or plan than this run's`);
  }
  // a resumed node's clock goes on from the checkpoint's
  const offset = resumed === undefined ? 0n : BigInt(resumed.header.nowNs) - monotonicNowNs();
  const clock = (): bigint => monotonicNowNs() + offset;

  const http: Server = config.tlsCert === undefined
    ? createServer()
    : createHttpsServer({ cert: readFileSync(config.tlsCert), key: readFileSync(config.tlsKey!) });
  const signal = SignalServer.attach(http, signalOptions(config, identity.peerId, operators));
  await new Promise<void>((resolve, reject) => {
    http.once('error', (error) => reject(new ServeError(`cannot listen on ${config.host}:${config.port}: ${error.message}`)));
    http.listen(config.port, config.host, resolve);
  });
  const { port } = http.address() as AddressInfo;
  const secure = config.tlsCert !== undefined;
  const host = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host;
  const hostText = host.includes(':') ? `[${host}]` : host;
  const signalUrl = `${secure ? 'wss' : 'ws'}://${hostText}:${port}`;
  const httpUrl = `${secure ? 'https' : 'http'}://${hostText}:${port}`;

  const admission = operators.length > 0 ? { room: config.room, operators } : undefined;
  const server: ServerNode = plan.installServer(bb, {
    artifact,
    self: identity.peerId,
    test,
    nowNs: clock(),
    ...(admission === undefined ? {} : { admission }),
    ...(resumed === undefined ? {} : { snapshot: resumed.snapshot }),
  });
  const WebSocket = secure ? await selfTrustingWebSocket() : undefined;
  const peer: RunningPeer = await connectPeer(server.node, {
    url: signalUrl,
    room: config.room,
    identity,
    role: 'server',
    clock,
    ...(WebSocket === undefined ? {} : { WebSocket }),
  });

  const startedAt = new Date();
  const history: RoundLine[] = [];
  let last: RoundReport = resumed === undefined ? { round: 0, accuracy: Number.NaN } : { round: resumed.header.round, accuracy: resumed.header.accuracy };
  const written = { export: undefined as { round: number; at: string } | undefined, checkpoint: undefined as { round: number; at: string } | undefined };
  let writeError: string | undefined;

  const members = (): number => signal.members(config.room).filter((id) => id !== identity.peerId).length;
  const exportModel = (): void => {
    if (config.export === undefined) return;
    writeFileAtomic(config.export, server.exportModel());
    written.export = { round: last.round, at: new Date().toISOString() };
  };
  const checkpoint = (): void => {
    if (config.checkpoint === undefined || last.round === 0) return;
    const node = server.node;
    // a snapshot takes a node with nothing queued: do what is queued first
    for (let polls = 0; node.hasWork() && polls < 1000; polls++) node.poll(clock());
    const snapshot = node.snapshot();
    const header = { version: 1 as const, round: last.round, accuracy: last.accuracy, nowNs: String(clock()), server: identity.peerId, plan: planDigest };
    writeFileAtomic(config.checkpoint, encodeCheckpoint({ header, snapshot }));
    written.checkpoint = { round: last.round, at: new Date().toISOString() };
  };
  const guarded = (what: string, write: () => void): void => {
    try {
      write();
      writeError = undefined;
    } catch (error) {
      writeError = `${what}: ${(error as Error).message}`;
      say(`cannot write the ${writeError}`);
    }
  };

  let finish: (accuracy: number) => void = () => {};
  const finished = new Promise<number>((resolve) => (finish = resolve));
  server.onRound((report) => {
    last = report;
    history.push({ ...report, at: new Date().toISOString() });
    if (history.length > config.history) history.splice(0, history.length - config.history);
    say(`round ${report.round}: ${(report.accuracy * 100).toFixed(1)} % (${members()} in the room${refusalText(server.refusals())})${secureText(report)}${privacyText(report, config)}`);
    const done = config.rounds !== undefined && report.round >= config.rounds;
    // writing waits for the poll that reported the round to end
    setImmediate(() => {
      if (done || report.round % config.exportEvery === 0) guarded(`export ${config.export ?? ''}`, exportModel);
      if (done || report.round % config.checkpointEvery === 0) guarded(`checkpoint ${config.checkpoint ?? ''}`, checkpoint);
      if (done) finish(report.accuracy);
    });
  });

  const status = (): Record<string, unknown> => ({
    server: identity.peerId,
    room: config.room,
    signal: signalUrl,
    plan: description,
    round: last.round,
    accuracy: last.accuracy,
    // ε as JSON: a number, "Infinity" (clipping without noise), or null without differential privacy
    epsilon: last.epsilon === undefined ? null : Number.isFinite(last.epsilon) ? last.epsilon : String(last.epsilon),
    rounds: config.rounds ?? null,
    members: members(),
    refusals: server.refusals(),
    startedAt: startedAt.toISOString(),
    resumedFrom: resumed === undefined ? null : { file: config.resume, round: resumed.header.round },
    export: config.export === undefined ? null : { file: config.export, ...written.export },
    checkpoint: config.checkpoint === undefined ? null : { file: config.checkpoint, ...written.checkpoint },
    writeError: writeError ?? null,
    signalling: signal.stats(),
    history,
  });
  http.on('request', (request: IncomingMessage, response: ServerResponse) => {
    const path = new URL(request.url ?? '/', 'http://localhost').pathname;
    const send = (code: number, type: string, body: string | Uint8Array): void => {
      response.writeHead(code, { 'content-type': type, 'access-control-allow-origin': '*', 'cache-control': 'no-store' }).end(body);
    };
    if (request.method !== 'GET' && request.method !== 'HEAD') return send(405, 'text/plain', 'GET only\n');
    if (path === '/status') return send(200, 'application/json', `${JSON.stringify(status(), null, 2)}\n`);
    if (path === '/metrics') return send(200, 'text/plain; version=0.0.4', prometheusText(status(), server.refusals()));
    if (path === '/plan.json') return send(200, 'application/json', `${JSON.stringify(description)}\n`);
    if (path === '/model.onnx') return send(200, 'application/octet-stream', model);
    return send(404, 'text/plain', 'not found: /status, /metrics, /plan.json, /model.onnx\n');
  });

  say(`server peer id: ${identity.peerId}`);
  say(`room ${config.room} at ${signalUrl} (${operators.length > 0 ? `clients need a join token of ${operators.length} operator key(s)` : 'open: any peer that proves its key joins; give --operator to admit by join token'})`);
  say(`status: ${httpUrl}/status and ${httpUrl}/metrics; clients build the plan from ${httpUrl}/plan.json and ${httpUrl}/model.onnx`);
  if (resumed !== undefined) {
    say(`resumed from ${config.resume} at round ${resumed.header.round}`);
  } else {
    say(`waiting for ${description.quorum} of ${description.clients} clients before the first round`);
    server.start([], clock());
  }

  let stopped = false;
  return {
    signalUrl,
    httpUrl,
    serverId: identity.peerId,
    finished,
    async stop() {
      if (stopped) return;
      stopped = true;
      guarded(`checkpoint ${config.checkpoint ?? ''}`, checkpoint);
      peer.stop();
      peer.transport.close();
      await signal.close();
      await new Promise<void>((resolve) => http.close(() => resolve()));
      server.node.free();
      test.free();
    },
  };
}

/** The WebSocket the server's own peer joins its own wss: signalling with (its certificate may be self-signed). */
async function selfTrustingWebSocket(): Promise<WebSocketConstructor> {
  const { WebSocket } = await import('ws');
  return class extends WebSocket {
    constructor(url: string) {
      super(url, { rejectUnauthorized: false });
    }
  } as unknown as WebSocketConstructor;
}

/** The status as Prometheus text exposition (format 0.0.4). */
export function prometheusText(status: Record<string, unknown>, refusals: Refusals): string {
  const lines: string[] = [];
  const metric = (name: string, type: 'gauge' | 'counter', help: string, value: number, labels = ''): void => {
    if (!lines.some((line) => line.startsWith(`# TYPE ${name} `))) lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
    lines.push(`${name}${labels} ${Number.isFinite(value) ? value : value === Infinity ? '+Inf' : 'NaN'}`);
  };
  metric('bytesandbrains_round', 'gauge', 'The last round the server reported.', status['round'] as number);
  metric('bytesandbrains_accuracy', 'gauge', "The global model's score on the server's test set after the last round.", status['accuracy'] as number);
  if (status['epsilon'] !== null) metric('bytesandbrains_dp_epsilon', 'gauge', 'The privacy spent so far: epsilon at the run\'s delta (differential privacy).', Number(status['epsilon']));
  metric('bytesandbrains_room_members', 'gauge', 'Peers in the room besides the server.', status['members'] as number);
  for (const [reason, n] of Object.entries(refusals)) {
    metric('bytesandbrains_refusals_total', 'counter', 'Contributions and announces refused, left out or cut, by reason.', n, `{reason="${reason}"}`);
  }
  const signalling = status['signalling'] as Record<string, number>;
  metric('bytesandbrains_signal_connections', 'gauge', 'Open signalling sockets.', signalling['connections'] ?? 0);
  const checkpoint = status['checkpoint'] as { round?: number } | null;
  if (checkpoint !== null) metric('bytesandbrains_checkpoint_round', 'gauge', 'The round of the last checkpoint written.', checkpoint.round ?? 0);
  metric('bytesandbrains_write_failing', 'gauge', '1 while the last export or checkpoint failed.', status['writeError'] === null ? 0 : 1);
  return `${lines.join('\n')}\n`;
}
