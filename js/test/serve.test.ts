/**
 * `bytesandbrains serve` (bin/bytesandbrains.mjs), run as an operator runs it: the real
 * process, Node clients over WebRTC (node-datachannel) that build their plan from the
 * server's /plan.json, and kill -9.
 * - a mistaken flag, model, test set or config file: a named reason and exit 2;
 * - a federation of the digits (the package's built-in PyTorch MLP) with three clients and
 *   a broken one (NaN features) on the defaults: the broken one's updates refused, the
 *   rounds going on at their deadline; progress per round, /status and /metrics while it
 *   runs; killed with SIGKILL mid-run and
 *   started again with --resume, it goes on from its checkpoint's round (not from round 1)
 *   and finishes past 88 %, its export scored by onnxruntime-node at the reported accuracy;
 * - with --secure, three clients signing with their identities: every round's line a
 *   secure sum of the three;
 * - the checkpoint writer, killed with SIGKILL at random points of a write, always leaves
 *   a whole checkpoint (the old or the new), never a part of one.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';

import { afterAll, beforeAll, describe, expect, test } from 'vitest';

import { readCheckpoint } from '../src/serve/checkpoint.js';
import { packageRoot } from './support.js';

const BIN = join(packageRoot, 'bin', 'bytesandbrains.mjs');
const DIGITS = '/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz';
const ort = createRequire(import.meta.url)('onnxruntime-node') as {
  InferenceSession: { create(bytes: Uint8Array): Promise<{ inputNames: string[]; outputNames: string[]; run(feeds: Record<string, unknown>): Promise<Record<string, { data: Float32Array }>> }> };
  Tensor: new (type: 'float32', data: Float32Array, dims: readonly number[]) => unknown;
};

let scratch: string;
const children: ChildProcess[] = [];
let rows: number[][] = [];

beforeAll(() => {
  if (!existsSync(join(packageRoot, 'dist', 'serve', 'cli.js'))) throw new Error('js/dist is missing: run `npm run build`');
  scratch = mkdtempSync(join(tmpdir(), 'bb-serve-'));
  rows = gunzipSync(readFileSync(DIGITS)).toString().trim().split('\n').map((line) => line.split(',').map(Number));
  const csv = (picked: number[][]): string => `${picked.map((row) => row.join(',')).join('\n')}\n`;
  writeFileSync(join(scratch, 'test.csv'), csv(rows.filter((_, i) => i % 5 === 0)));
  writeFileSync(join(scratch, 'narrow.csv'), csv(rows.slice(0, 20).map((row) => row.slice(54))));
  // three clients, a third of the training rows each (what is tested here is the server,
  // not how FedAvg copes with skew: template-onnx.test.ts and the examples do that)
  const train = rows.filter((_, i) => i % 5 !== 0);
  for (let k = 0; k < 3; k++) writeFileSync(join(scratch, `shard${k}.csv`), csv(train.filter((_, i) => i % 3 === k)));
});

afterAll(() => {
  for (const child of children) child.kill('SIGKILL');
  rmSync(scratch, { recursive: true, force: true });
});

function serveSync(args: string[]): { status: number | null; output: string } {
  const result = spawnSync(process.execPath, [BIN, 'serve', ...args], { cwd: scratch, encoding: 'utf8', timeout: 60_000 });
  return { status: result.status, output: result.stdout + result.stderr };
}

describe('mistakes are named, with exit 2', () => {
  test.each([
    [['--model', 'builtin:digits-mlp', '--test', 'test.csv', '--bogus'], /Unknown option '--bogus'/],
    [['--test', 'test.csv'], /--model is missing/],
    [['--model', 'builtin:digits-mlp'], /--test is missing/],
    [['--model', 'builtin:nope', '--test', 'test.csv'], /no such built-in model \(there are builtin:digits-mlp, builtin:digits-cnn\)/],
    [['--model', 'test.csv', '--test', 'test.csv'], /--model test\.csv is not an ONNX model/],
    [['--model', 'missing.onnx', '--test', 'test.csv'], /--model missing\.onnx: ENOENT/],
    [['--model', 'builtin:digits-mlp', '--test', 'test.csv', '--clients', '4', '--quorum', '5'], /--quorum must be a whole number >= 1 and <= 4, got "5"/],
    [['--model', 'builtin:digits-mlp', '--test', 'test.csv', '--lr', 'fast'], /--lr must be a number > 0, got "fast"/],
    [['--model', 'builtin:digits-mlp', '--test', 'test.csv', '--freeze', 'nonexistent'], /cannot be trained so: .*nonexistent/],
    [['--model', 'builtin:digits-mlp', '--test', 'narrow.csv'], /--test narrow\.csv does not fit --model builtin:digits-mlp: .*not whole rows of 64 \(input pixels takes 64 per row\)/],
    [['--model', 'builtin:digits-mlp', '--test', 'test.csv', '--resume', 'test.csv'], /checkpoint test\.csv is not a whole checkpoint of this server/],
    [['--config', 'bad.json'], /--config bad\.json: unknown key "clientz"/],
    [['--model', 'builtin:digits-mlp', '--test', 'test.csv', '--dp-clip', '1'], /--dp-clip and --dp-noise go together/],
    [['--model', 'builtin:digits-mlp', '--test', 'test.csv', '--dp-clip', '0', '--dp-noise', '1'], /--dp-clip must be a number > 0 and <= 3e\+38, got "0"/],
    [['--model', 'builtin:digits-mlp', '--test', 'test.csv', '--dp-clip', '1', '--dp-noise', '1', '--dp-delta', '1'], /--dp-delta must be in \(0, 1\), got "1"/],
    [['--model', 'builtin:digits-mlp', '--test', 'test.csv', '--secure-shares', '4'], /--secure-threshold and --secure-shares need --secure/],
    [['--model', 'builtin:digits-mlp', '--test', 'test.csv', '--secure', '--secure-threshold', '0'], /--secure-threshold must be a whole number >= 1 and <= 254, got "0"/],
    [['--model', 'builtin:digits-mlp', '--test', 'test.csv', '--secure', '--clients', '2'], /--secure needs --clients of at least 3/],
    [['--model', 'builtin:digits-mlp', '--test', 'test.csv', '--secure', '--quorum', '2'], /--secure needs --quorum of at least 3/],
    [['--model', 'builtin:digits-mlp', '--test', 'test.csv', '--secure', '--dp-clip', '1', '--dp-noise', '1', '--dp-sample-rate', '0.5'], /cannot go with --secure/],
  ])('%j', (args, message) => {
    writeFileSync(join(scratch, 'bad.json'), JSON.stringify({ model: 'builtin:digits-mlp', clientz: 3 }));
    const { status, output } = serveSync(args);
    expect(output).toMatch(message);
    expect(status).toBe(2);
  });
});

/** A running `serve`: its output so far, and waits on it. */
class ServeProcess {
  output = '';
  readonly child: ChildProcess;
  readonly exited: Promise<number | null>;

  constructor(args: string[]) {
    this.child = spawn(process.execPath, [BIN, 'serve', ...args], { cwd: scratch });
    children.push(this.child);
    this.child.stdout!.on('data', (chunk: Buffer) => (this.output += chunk.toString()));
    this.child.stderr!.on('data', (chunk: Buffer) => (this.output += chunk.toString()));
    this.exited = new Promise((resolve) => this.child.on('exit', resolve));
  }

  async waitFor(pattern: RegExp, timeoutMs = 90_000): Promise<RegExpExecArray> {
    for (const start = Date.now(); Date.now() - start < timeoutMs; await new Promise((r) => setTimeout(r, 100))) {
      const match = pattern.exec(this.output);
      if (match !== null) return match;
      if (this.child.exitCode !== null) break;
    }
    throw new Error(`serve never printed ${pattern}:\n${this.output}`);
  }

  rounds(): number[] {
    return [...this.output.matchAll(/^round (\d+): ([\d.]+) %/gm)].map((m) => Number(m[1]));
  }
}

describe('a federation run from one command', () => {
  test('progress per round, status and metrics; killed with SIGKILL and resumed from its checkpoint; the export scores as reported', async () => {
    const args = ['--model', 'builtin:digits-mlp', '--test', 'test.csv', '--port', '0', '--clients', '4', '--rounds', '20',
      '--optimizer', 'adam', '--lr', '0.01', '--steps-per-round', '20', '--deadline-ms', '500',
      '--checkpoint', 'fed.ckpt', '--checkpoint-every', '1', '--export', 'global.onnx'];
    const first = new ServeProcess(args);
    const base = (await first.waitFor(/\/status and (http:\/\/[\d.:]+)\/metrics/))[1]!;
    await first.waitFor(/waiting for 2 of 4 clients before the first round/);
    for (let k = 0; k < 4; k++) {
      const broken = k === 3 ? ['nan'] : [];
      const client = spawn(process.execPath, [join(packageRoot, 'test', 'fixtures', 'serve-client.mjs'), base, join(scratch, `shard${k % 3}.csv`), ...broken]);
      children.push(client);
    }
    await first.waitFor(/^round 5: /m);
    const status = (await (await fetch(`${base}/status`)).json()) as { round: number; members: number; plan: { clients: number }; refusals: Record<string, number> };
    expect(status.round).toBeGreaterThanOrEqual(5);
    expect(status.members).toBe(4);
    expect(status.plan.clients).toBe(4);
    // the broken client trains on nothing (every step refused): its updates claim no samples and are refused
    expect(status.refusals['refused_samples']).toBeGreaterThanOrEqual(1);
    expect(first.output).toMatch(/left out or refused so far: .*\d+ refused_samples/);
    const metrics = await (await fetch(`${base}/metrics`)).text();
    expect(metrics).toMatch(/^# TYPE bytesandbrains_round gauge\nbytesandbrains_round \d+$/m);
    expect(metrics).toMatch(/^bytesandbrains_refusals_total\{reason="refused_length"\} 0$/m);
    // round 0 is the initial model; no round is numbered twice or skipped in what it printed
    const before = first.rounds();
    expect(before).toEqual(Array.from({ length: before.length }, (_, i) => i));

    first.child.kill('SIGKILL');
    await first.exited;
    const saved = readCheckpoint(join(scratch, 'fed.ckpt'));
    expect(saved.header.round).toBeGreaterThanOrEqual(4);

    const port = new URL(base).port;
    const second = new ServeProcess([...args.map((a) => (a === '0' ? port : a)), '--resume', 'fed.ckpt']);
    await second.waitFor(new RegExp(`resumed from fed\\.ckpt at round ${saved.header.round}`));
    await second.waitFor(/^trained: ([\d.]+) % after 20 rounds/m, 120_000);
    expect(await second.exited).toBe(0);
    const resumedRounds = second.rounds();
    expect(resumedRounds[0]).toBe(saved.header.round + 1);
    expect(resumedRounds.at(-1)).toBe(20);
    const accuracy = Number(/^round 20: ([\d.]+) %/m.exec(second.output)![1]);
    expect(accuracy, second.output).toBeGreaterThanOrEqual(88);

    // onnxruntime scores the exported global model as the server reported it
    const test = rows.filter((_, i) => i % 5 === 0);
    const session = await ort.InferenceSession.create(new Uint8Array(readFileSync(join(scratch, 'global.onnx'))));
    const x = Float32Array.from(test.flatMap((row) => row.slice(0, 64)));
    const logits = (await session.run({ [session.inputNames[0]!]: new ort.Tensor('float32', x, [test.length, 64]) }))[session.outputNames[0]!]!.data;
    const right = test.filter((row, i) => {
      const scores = logits.subarray(i * 10, i * 10 + 10);
      return scores.indexOf(Math.max(...scores)) === row[64];
    }).length;
    expect((100 * right) / test.length).toBeCloseTo(accuracy, 0);
    expect(readCheckpoint(join(scratch, 'fed.ckpt')).header.round).toBe(20);
  }, 240_000);
});

describe('--secure', () => {
  test('every round is a secure sum of the three clients, each signing with its identity; the line says how many were summed', async () => {
    const run = new ServeProcess(['--model', 'builtin:digits-mlp', '--test', 'test.csv', '--port', '0', '--clients', '3', '--rounds', '3',
      '--steps-per-round', '5', '--deadline-ms', '500', '--secure', '--secure-threshold', '2', '--secure-shares', '2', '--key', 'secure.key']);
    const base = (await run.waitFor(/\/status and (http:\/\/[\d.:]+)\/metrics/))[1]!;
    // a secure sum holds at least 3: the rounds wait for all three
    await run.waitFor(/waiting for 3 of 3 clients before the first round/);
    for (let k = 0; k < 3; k++) {
      children.push(spawn(process.execPath, [join(packageRoot, 'test', 'fixtures', 'serve-client.mjs'), base, join(scratch, `shard${k}.csv`)]));
    }
    await run.waitFor(/^trained: ([\d.]+) % after 3 rounds/m, 120_000);
    expect(await run.exited).toBe(0);
    const lines = run.output.split('\n').filter((line) => /^round [1-3]: /.test(line));
    expect(lines, run.output).toHaveLength(3);
    for (const line of lines) expect(line).toMatch(/; a secure sum of 3$/);
  }, 150_000);
});

describe('the checkpoint writer under kill -9', () => {
  test('a write killed at any point leaves a whole checkpoint, the old one or the new', async () => {
    const path = join(scratch, 'big.ckpt');
    // a writer that rewrites a 48 MiB checkpoint over and over, each with its own round
    const writer = `
      import { encodeCheckpoint, writeFileAtomic } from ${JSON.stringify(join(packageRoot, 'dist', 'serve', 'checkpoint.js'))};
      const snapshot = new Uint8Array(48 << 20);
      for (let round = 1; ; round++) {
        snapshot.fill(round & 0xff);
        writeFileAtomic(${JSON.stringify(path)}, encodeCheckpoint({ header: { version: 1, round, accuracy: 0, nowNs: '0', server: 's', plan: 'p' }, snapshot }));
        console.log('wrote', round);
      }`;
    for (let kill = 0; kill < 6; kill++) {
      const child = spawn(process.execPath, ['--input-type=module', '-e', writer]);
      let output = '';
      child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
      // after its first whole write, at a random point of a later one
      while (!output.includes('wrote 1')) await new Promise((r) => setTimeout(r, 5));
      await new Promise((r) => setTimeout(r, 5 + Math.random() * 200));
      child.kill('SIGKILL');
      await new Promise((r) => child.on('exit', r));
      const { header, snapshot } = readCheckpoint(path);
      expect(snapshot.length).toBe(48 << 20);
      expect(snapshot[0]).toBe(header.round & 0xff);
      expect(snapshot.at(-1)).toBe(header.round & 0xff);
    }
  }, 120_000);
});
