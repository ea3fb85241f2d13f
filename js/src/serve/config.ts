/**
 * What `bytesandbrains serve` runs, from flags or a JSON file (the same names, the flags
 * winning): every choice checked up front, with the flag or key that was wrong named.
 */
import { parseArgs } from 'node:util';

import type { DpOptions } from '../templates/federated.js';

export interface ServeConfig {
  /** An ONNX file, or `builtin:digits-mlp` / `builtin:digits-cnn` (the models the package ships). */
  readonly model: string;
  /** The server's test set: a CSV file of feature columns and a label column. */
  readonly test: string;
  /** Which column of `test` is the label: 0-based, negative from the right (default -1). */
  readonly labelColumn: number;
  /** The first line of `test` names the columns. */
  readonly header: boolean;
  readonly optimizer?: 'sgd' | 'momentum' | 'nesterov' | 'adam' | 'adamw';
  readonly lr?: number;
  readonly loss?: 'xent' | 'mse' | 'bce';
  readonly batch?: number;
  readonly stepsPerRound?: number;
  readonly freeze: readonly string[];
  /** Clients a round waits for; quorum: what it closes with at its deadline (default half). */
  readonly clients: number;
  readonly quorum?: number;
  readonly deadlineMs: number;
  readonly roundMs: number;
  /** Stop after this many rounds (default: go on). */
  readonly rounds?: number;
  readonly name: string;
  readonly port: number;
  readonly host: string;
  readonly room: string;
  /** The server's identity file (made on the first start): its peer id, which clients are given. */
  readonly key: string;
  /** Operators' public keys (base64url): the room admits clients holding a join token they signed. */
  readonly operators: readonly string[];
  /** Refuse rooms without a policy (the federation's room always has one when operators are given). */
  readonly closed: boolean;
  readonly iceServers: readonly string[];
  readonly turnSecret?: string;
  readonly tlsCert?: string;
  readonly tlsKey?: string;
  /** Write the global model as ONNX here, every `exportEvery` rounds and at the end. */
  readonly export?: string;
  readonly exportEvery: number;
  /** Write a checkpoint here every `checkpointEvery` rounds and at the end. */
  readonly checkpoint?: string;
  readonly checkpointEvery: number;
  /** Go on from this checkpoint. */
  readonly resume?: string;
  /** Rounds the status endpoint keeps (older ones are dropped). */
  readonly history: number;
  /**
   * Differential privacy (DP-FedAvg): each update clipped to dpClip (adaptive from there with
   * dpClipQuantile), the sum noised with dpNoise × the clip, each client's update taken with
   * probability dpSampleRate; ε reported at dpDelta.
   */
  readonly dp?: DpOptions & { readonly delta: number };
  /** Secure aggregation (SecAgg+): the server sees only each round's sum; 0 takes SecAgg+'s default. */
  readonly secure?: { readonly threshold: number; readonly shares: number };
}

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

export const USAGE = `usage: bytesandbrains serve --model FILE.onnx|builtin:NAME --test FILE.csv [options]
       bytesandbrains serve --config FILE.json [options]

Runs a federated-averaging server (the package's federatedAveraging template) with the
signalling its clients meet at, printing a line per round; GET /status (JSON) and
/metrics (Prometheus text) on the same port tell how it goes.

the model and its training on the clients
  --model FILE|builtin:NAME  an ONNX model (e.g. torch.onnx.export's), or a model the package
                       ships: builtin:digits-mlp, builtin:digits-cnn
  --optimizer NAME     sgd, momentum, nesterov, adam (default), adamw
  --lr X               learning rate (default the optimizer's: 0.001 adam, 0.01 sgd)
  --loss NAME          xent (default), mse, bce
  --batch N            rows per local step (default 32)
  --steps-per-round N  local steps per round (default 10)
  --freeze A,B         initializers never trained (e.g. an input's mean and std)
the server's test set, scored every round
  --test FILE.csv      feature columns and a label column (numbers, comma-separated)
  --label-column N     0-based, negative from the right (default -1: the last)
  --header             the first line names the columns
the rounds
  --clients N          updates a round waits for (default 4)
  --quorum N           updates a round closes with at its deadline (default half the clients);
                       no round starts before that many clients are present
  --deadline-ms MS     how long a round waits for all its clients (default 1000)
  --round-ms MS        how often a round may start (default 200)
  --rounds N           stop after N rounds (default: go on until stopped)
  --dp-clip X --dp-noise Z   differential privacy (DP-FedAvg): each update clipped to L2 norm X,
                       the sum noised with Z × X; each round's line says the privacy spent
                       (ε at --dp-delta D, default 1e-5)
  --dp-clip-quantile Q adaptive clipping: the clip starts at X and follows the Q-quantile of
                       the update norms (Andrew et al.; 0.5 is the usual choice)
  --dp-sample-rate q   each round takes each client's update with probability q (Poisson
                       sampling, ε accounted at q); --clients is then the population, and a
                       round closes at its deadline with every sampled update that came
  --secure             secure aggregation (SecAgg+): the server sees only each round's sum of
                       the clients' masked updates, never one; a sum holds at least 3 (the
                       default quorum); each round's line says how many were summed.
                       Clients sign their keys with their identities
  --secure-threshold T shares that rebuild a dropped client's secrets (default SecAgg+'s)
  --secure-shares S    neighbours each client shares them with (default SecAgg+'s)
  --name NAME          the federation's name (default Federation); clients use the same
the room (signalling on the same port)
  --port N             default 8787 (0: any free port)
  --host ADDR          default 127.0.0.1 (0.0.0.0: every interface)
  --room NAME          default federation
  --key FILE           the server's identity (default server.key, made on the first start)
  --operator KEY       an operator's public key (base64url, repeat for more): clients need a
                       join token it signed (npx -p bytesandbrains bytesandbrains-token);
                       without one the room is open to any peer that proves its key
  --closed             refuse rooms other than the federation's
  --ice-server URL     STUN or TURN server handed to every peer (repeat for more)
  --turn-secret S      coturn's static-auth-secret: every peer gets TURN credentials of its own
  --tls-cert FILE --tls-key FILE   serve https and wss
what it writes
  --export FILE.onnx   the global model as plain ONNX, every --export-every rounds (default 1)
                       and at the end
  --checkpoint FILE    the server's whole state, every --checkpoint-every rounds (default 5)
                       and at the end, written to a new file and renamed over the old one
  --resume FILE        go on from a checkpoint (the same model, plan and --key)
  --history N          rounds /status keeps (default 100)
  --config FILE.json   any of the above as JSON keys (camelCase: {"model": ..., "clients": 8,
                       "stepsPerRound": 5, "operators": [...]}); flags win`;

const OPTIONS = {
  config: { type: 'string' },
  model: { type: 'string' },
  test: { type: 'string' },
  'label-column': { type: 'string' },
  header: { type: 'boolean' },
  optimizer: { type: 'string' },
  lr: { type: 'string' },
  loss: { type: 'string' },
  batch: { type: 'string' },
  'steps-per-round': { type: 'string' },
  freeze: { type: 'string' },
  clients: { type: 'string' },
  quorum: { type: 'string' },
  'deadline-ms': { type: 'string' },
  'round-ms': { type: 'string' },
  rounds: { type: 'string' },
  name: { type: 'string' },
  port: { type: 'string' },
  host: { type: 'string' },
  room: { type: 'string' },
  key: { type: 'string' },
  operator: { type: 'string', multiple: true },
  closed: { type: 'boolean' },
  'ice-server': { type: 'string', multiple: true },
  'turn-secret': { type: 'string' },
  'tls-cert': { type: 'string' },
  'tls-key': { type: 'string' },
  export: { type: 'string' },
  'export-every': { type: 'string' },
  checkpoint: { type: 'string' },
  'checkpoint-every': { type: 'string' },
  resume: { type: 'string' },
  history: { type: 'string' },
  'dp-clip': { type: 'string' },
  'dp-noise': { type: 'string' },
  'dp-delta': { type: 'string' },
  'dp-clip-quantile': { type: 'string' },
  'dp-sample-rate': { type: 'string' },
  secure: { type: 'boolean' },
  'secure-threshold': { type: 'string' },
  'secure-shares': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

const camel = (flag: string): string => flag.replace(/-(\w)/g, (_, c: string) => c.toUpperCase());
/** The JSON key of each flag (`operator` and `ice-server` are lists: `operators`, `iceServers`). */
const KEY_OF_FLAG: Readonly<Record<string, string>> = Object.fromEntries(
  Object.keys(OPTIONS).filter((flag) => flag !== 'config' && flag !== 'help').map((flag) => [flag, flag === 'operator' ? 'operators' : flag === 'ice-server' ? 'iceServers' : camel(flag)]),
);
const FLAG_OF_KEY: Readonly<Record<string, string>> = Object.fromEntries(Object.entries(KEY_OF_FLAG).map(([flag, key]) => [key, flag]));

/** Reads the command line (and the JSON file it names) into a checked config; `help` when asked for. */
export function parseServeArgs(argv: readonly string[], readText: (path: string) => string): ServeConfig | 'help' {
  let parsed: ReturnType<typeof parseArgs<{ options: typeof OPTIONS; strict: true; allowPositionals: false }>>;
  try {
    parsed = parseArgs({ args: [...argv], options: OPTIONS, strict: true, allowPositionals: false });
  } catch (error) {
    throw new ConfigError((error as Error).message.replace(/\. To specify a positional argument.*$/s, ''));
  }
  const flags = parsed.values as Record<string, string | boolean | string[] | undefined>;
  if (flags['help'] === true) return 'help';
  const raw: Record<string, unknown> = {};
  if (typeof flags['config'] === 'string') Object.assign(raw, readConfigFile(flags['config'], readText));
  for (const [flag, value] of Object.entries(flags)) {
    if (flag === 'config' || value === undefined) continue;
    raw[KEY_OF_FLAG[flag]!] = value;
  }
  return checkConfig(raw);
}

function readConfigFile(path: string, readText: (path: string) => string): Record<string, unknown> {
  let text: string;
  try {
    text = readText(path);
  } catch (error) {
    throw new ConfigError(`--config ${path}: ${(error as Error).message}`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new ConfigError(`--config ${path} is not JSON: ${(error as Error).message}`);
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw new ConfigError(`--config ${path} is not a JSON object`);
  for (const key of Object.keys(json)) {
    if (!(key in FLAG_OF_KEY)) throw new ConfigError(`--config ${path}: unknown key "${key}" (the keys are the flags in camelCase: ${Object.keys(FLAG_OF_KEY).join(', ')})`);
  }
  return json as Record<string, unknown>;
}

/** The flag (or JSON key) a value came from, for messages. */
const named = (key: string): string => `--${FLAG_OF_KEY[key] ?? key}`;

function text(raw: Record<string, unknown>, key: string): string | undefined {
  const value = raw[key];
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || value === '') throw new ConfigError(`${named(key)} must be a non-empty text, got ${JSON.stringify(value)}`);
  return value;
}

function list(raw: Record<string, unknown>, key: string, splitCommas = false): string[] {
  const value = raw[key];
  if (value === undefined) return [];
  const items = typeof value === 'string' ? [value] : value;
  if (!Array.isArray(items) || items.some((item) => typeof item !== 'string' || item === '')) {
    throw new ConfigError(`${named(key)} must be texts, got ${JSON.stringify(value)}`);
  }
  return splitCommas ? (items as string[]).flatMap((item) => item.split(',')) : (items as string[]);
}

function number(raw: Record<string, unknown>, key: string, check: { integer?: boolean; min: number; max?: number; positive?: boolean }): number | undefined {
  const value = raw[key];
  if (value === undefined) return undefined;
  const n = typeof value === 'number' ? value : typeof value === 'string' && value.trim() !== '' ? Number(value) : Number.NaN;
  const kind = check.integer === true ? 'a whole number' : 'a number';
  const range = check.positive === true ? ` > ${check.min}` : ` >= ${check.min}`;
  if (!Number.isFinite(n) || (check.integer === true && !Number.isInteger(n)) || (check.positive === true ? n <= check.min : n < check.min) || (check.max !== undefined && n > check.max)) {
    throw new ConfigError(`${named(key)} must be ${kind}${range}${check.max === undefined ? '' : ` and <= ${check.max}`}, got ${JSON.stringify(value)}`);
  }
  return n;
}

function choice<T extends string>(raw: Record<string, unknown>, key: string, choices: readonly T[]): T | undefined {
  const value = raw[key];
  if (value === undefined) return undefined;
  if (!choices.includes(value as T)) throw new ConfigError(`${named(key)} must be one of ${choices.join(', ')}, got ${JSON.stringify(value)}`);
  return value as T;
}

function flag(raw: Record<string, unknown>, key: string): boolean {
  const value = raw[key];
  if (value === undefined) return false;
  if (typeof value !== 'boolean') throw new ConfigError(`${named(key)} is true or false, got ${JSON.stringify(value)}`);
  return value;
}

const ROOM = /^[A-Za-z0-9_-]{1,128}$/;
const NAME = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;

function checkConfig(raw: Record<string, unknown>): ServeConfig {
  const model = text(raw, 'model');
  if (model === undefined) throw new ConfigError('--model is missing: an ONNX file, or builtin:digits-mlp or builtin:digits-cnn');
  const test = text(raw, 'test');
  if (test === undefined) throw new ConfigError('--test is missing: a CSV file the server scores the global model on every round');
  const clients = number(raw, 'clients', { integer: true, min: 1, max: 1024 }) ?? 4;
  const quorum = number(raw, 'quorum', { integer: true, min: 1, max: clients });
  const room = text(raw, 'room') ?? 'federation';
  if (!ROOM.test(room)) throw new ConfigError(`--room must be 1–128 of [A-Za-z0-9_-], got ${JSON.stringify(room)}`);
  const name = text(raw, 'name') ?? 'Federation';
  if (!NAME.test(name)) throw new ConfigError(`--name must be a letter or _ then up to 63 letters, digits or _, got ${JSON.stringify(name)}`);
  const tlsCert = text(raw, 'tlsCert');
  const tlsKey = text(raw, 'tlsKey');
  if ((tlsCert === undefined) !== (tlsKey === undefined)) throw new ConfigError('--tls-cert and --tls-key go together');
  const iceServers = list(raw, 'iceServers');
  const turnSecret = text(raw, 'turnSecret');
  const turnUrls = iceServers.filter((url) => /^turns?:/.test(url));
  if (turnUrls.length > 0 && turnSecret === undefined) throw new ConfigError('a turn: --ice-server needs --turn-secret (its static-auth-secret)');
  if (turnSecret !== undefined && turnUrls.length === 0) throw new ConfigError('--turn-secret needs a turn: URL in --ice-server');
  const freeze = list(raw, 'freeze', true);
  const dpClip = number(raw, 'dpClip', { min: 0, positive: true, max: 3e38 });
  const dpNoise = number(raw, 'dpNoise', { min: 0, max: 3e38 });
  const dpDelta = number(raw, 'dpDelta', { min: 0, positive: true });
  if (dpDelta !== undefined && dpDelta >= 1) throw new ConfigError(`--dp-delta must be in (0, 1), got ${JSON.stringify(raw['dpDelta'])}`);
  if ((dpClip === undefined) !== (dpNoise === undefined)) throw new ConfigError('--dp-clip and --dp-noise go together');
  if (dpDelta !== undefined && dpClip === undefined) throw new ConfigError('--dp-delta needs --dp-clip and --dp-noise');
  const dpQuantile = number(raw, 'dpClipQuantile', { min: 0, positive: true });
  if (dpQuantile !== undefined && dpQuantile >= 1) throw new ConfigError(`--dp-clip-quantile must be in (0, 1), got ${JSON.stringify(raw['dpClipQuantile'])}`);
  const dpSampleRate = number(raw, 'dpSampleRate', { min: 0, positive: true });
  if (dpSampleRate !== undefined && dpSampleRate > 1) throw new ConfigError(`--dp-sample-rate must be in (0, 1], got ${JSON.stringify(raw['dpSampleRate'])}`);
  if ((dpQuantile !== undefined || dpSampleRate !== undefined) && dpClip === undefined) {
    throw new ConfigError('--dp-clip-quantile and --dp-sample-rate need --dp-clip and --dp-noise');
  }
  const dpClipOption = dpClip === undefined || dpQuantile === undefined ? dpClip : { initial: dpClip, quantile: dpQuantile };
  const secure = flag(raw, 'secure');
  const secureThreshold = number(raw, 'secureThreshold', { integer: true, min: 1, max: 254 });
  const secureShares = number(raw, 'secureShares', { integer: true, min: 1, max: 254 });
  if (!secure && (secureThreshold !== undefined || secureShares !== undefined)) throw new ConfigError('--secure-threshold and --secure-shares need --secure');
  if (secure && clients < 3) throw new ConfigError(`--secure needs --clients of at least 3 (a secure sum holds at least 3 updates), got ${clients}`);
  if (secure && quorum !== undefined && quorum < 3) throw new ConfigError(`--secure needs --quorum of at least 3 (a secure sum holds at least 3 updates), got ${quorum}`);
  if (secure && (dpQuantile !== undefined || dpSampleRate !== undefined)) {
    throw new ConfigError('--dp-clip-quantile and --dp-sample-rate are the server\'s and cannot go with --secure (the server sees only the masked sum)');
  }
  const optional = <K extends string, V>(key: K, value: V | undefined): { [P in K]?: V } => (value === undefined ? {} : ({ [key]: value } as { [P in K]?: V }));
  return {
    model,
    test,
    labelColumn: number(raw, 'labelColumn', { integer: true, min: -1_000_000 }) ?? -1,
    header: flag(raw, 'header'),
    ...optional('optimizer', choice(raw, 'optimizer', ['sgd', 'momentum', 'nesterov', 'adam', 'adamw'] as const)),
    ...optional('lr', number(raw, 'lr', { min: 0, positive: true })),
    ...optional('loss', choice(raw, 'loss', ['xent', 'mse', 'bce'] as const)),
    ...optional('batch', number(raw, 'batch', { integer: true, min: 1, max: 1_000_000 })),
    ...optional('stepsPerRound', number(raw, 'stepsPerRound', { integer: true, min: 1, max: 1_000_000 })),
    freeze,
    clients,
    ...optional('quorum', quorum),
    deadlineMs: number(raw, 'deadlineMs', { integer: true, min: 1, max: 86_400_000 }) ?? 1000,
    roundMs: number(raw, 'roundMs', { integer: true, min: 1, max: 86_400_000 }) ?? 200,
    ...optional('rounds', number(raw, 'rounds', { integer: true, min: 1 })),
    name,
    port: number(raw, 'port', { integer: true, min: 0, max: 65535 }) ?? 8787,
    host: text(raw, 'host') ?? '127.0.0.1',
    room,
    key: text(raw, 'key') ?? 'server.key',
    operators: list(raw, 'operators'),
    closed: flag(raw, 'closed'),
    iceServers,
    ...optional('turnSecret', turnSecret),
    ...optional('tlsCert', tlsCert),
    ...optional('tlsKey', tlsKey),
    ...optional('export', text(raw, 'export')),
    exportEvery: number(raw, 'exportEvery', { integer: true, min: 1 }) ?? 1,
    ...optional('checkpoint', text(raw, 'checkpoint')),
    checkpointEvery: number(raw, 'checkpointEvery', { integer: true, min: 1 }) ?? 5,
    ...optional('resume', text(raw, 'resume')),
    history: number(raw, 'history', { integer: true, min: 1, max: 100_000 }) ?? 100,
    ...optional(
      'dp',
      dpClipOption === undefined || dpNoise === undefined
        ? undefined
        : { clip: dpClipOption, noiseMultiplier: dpNoise, delta: dpDelta ?? 1e-5, ...optional('sampleRate', dpSampleRate) },
    ),
    ...optional('secure', secure ? { threshold: secureThreshold ?? 0, shares: secureShares ?? 0 } : undefined),
  };
}
