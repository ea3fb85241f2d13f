/**
 * The wasm build and the native build must agree byte for byte: every model of the ONNX
 * backend node tests is decoded and re-encoded through the IR by both (natively by
 * `bb reencode IN OUT`), and the two encodings compared; so are the summaries of a sample
 * (natively `bb inspect [--json]`).
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { availableParallelism, tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { isDeepStrictEqual, promisify } from 'node:util';
import { expect, test } from 'vitest';

import { loadBb, OnnxModel, type Bb } from '../src/index.js';
import { onnxNodeModels, repoRoot, wasmBytes } from './support.js';

const run = promisify(execFile);

type Outcome = { bytes: Uint8Array } | { error: string };

/** Runs the native tool; its stdout, or what it said on stderr when it failed. */
async function runNative(tool: string, args: string[]): Promise<{ stdout: string } | { error: string }> {
  try {
    const { stdout } = await run(tool, args, { maxBuffer: 64 << 20 });
    return { stdout };
  } catch (error) {
    const stderr = (error as { stderr?: unknown }).stderr;
    return { error: typeof stderr === 'string' && stderr !== '' ? stderr.trim() : String(error) };
  }
}

const BUILD_HINT = 'build it with `cmake -S . -B build && cmake --build build` from the repository root, or point BB_NATIVE_BB at it';

/** The native bb tool, checked to run at all, so a broken tool fails once rather than once per model. */
async function nativeTool(): Promise<string> {
  const path = process.env['BB_NATIVE_BB'] ?? join(repoRoot, 'build', 'bb');
  if (!existsSync(path)) throw new Error(`the native bb tool is missing at ${path}: ${BUILD_HINT}`);
  const probe = await runNative(path, ['version']);
  if ('error' in probe) throw new Error(`the native bb tool at ${path} does not run (${probe.error}): ${BUILD_HINT}`);
  return path;
}

/** Fails with the number of problems and the first few, one per line. */
function expectNoProblems(problems: string[]): void {
  const shown = 20;
  const list = problems.sort().slice(0, shown).join('\n  ');
  const more = problems.length > shown ? `\n  ... and ${problems.length - shown} more` : '';
  expect(problems.length, `${problems.length} problems:\n  ${list}${more}`).toBe(0);
}

async function reencodeNative(tool: string, model: string, out: string): Promise<Outcome> {
  const result = await runNative(tool, ['reencode', model, out]);
  return 'error' in result ? result : { bytes: await readFile(out) };
}

function reencodeWasm(bb: Bb, bytes: Uint8Array): Outcome {
  let model: OnnxModel | undefined;
  try {
    model = OnnxModel.decode(bb, bytes);
    return { bytes: model.encode() };
  } catch (error) {
    return { error: String(error) };
  } finally {
    model?.free();
  }
}

/** Runs `work` on every item, at most `limit` at a time. */
async function forEachLimited<T>(items: readonly T[], limit: number, work: (item: T, index: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const index = next++;
      await work(items[index] as T, index);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

function firstDifference(a: Uint8Array, b: Uint8Array): string {
  const shorter = Math.min(a.length, b.length);
  for (let i = 0; i < shorter; i++) {
    if (a[i] !== b[i]) return `first difference at byte ${i} (native ${a[i]}, wasm ${b[i]})`;
  }
  return `lengths differ (native ${a.length}, wasm ${b.length})`;
}

/** What is wrong with a model's two outcomes, or undefined when both encoded it identically. */
function compare(native: Outcome, wasm: Outcome): string | undefined {
  if ('error' in native || 'error' in wasm) {
    const failures = [
      'error' in native ? `native bb failed: ${native.error}` : '',
      'error' in wasm ? `wasm failed: ${wasm.error}` : '',
    ];
    return failures.filter((failure) => failure !== '').join('; ');
  }
  return sameBytes(native.bytes, wasm.bytes) ? undefined : firstDifference(native.bytes, wasm.bytes);
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((byte, i) => byte === b[i]);
}

test('every ONNX node-test model re-encodes identically in the wasm and the native build', async () => {
  const tool = await nativeTool();
  const models = onnxNodeModels();
  expect(models.length).toBeGreaterThan(0);
  const bb = await loadBb(wasmBytes());
  const scratch = await mkdtemp(join(tmpdir(), 'bb-roundtrip-'));
  const started = performance.now();
  try {
    const problems: string[] = [];
    let sameAsInput = 0;
    await forEachLimited(models, availableParallelism(), async (model, index) => {
      const name = basename(dirname(model));
      const input = await readFile(model);
      const native = await reencodeNative(tool, model, join(scratch, `${index}.onnx`));
      const wasm = reencodeWasm(bb, input);
      const problem = compare(native, wasm);
      if (problem !== undefined) problems.push(`${name}: ${problem}`);
      else if ('bytes' in wasm && sameBytes(wasm.bytes, input)) sameAsInput++;
    });
    const seconds = ((performance.now() - started) / 1000).toFixed(1);
    console.log(
      `round trip: ${models.length} models, ${models.length - problems.length} identical in wasm and native ` +
        `(${sameAsInput} also identical to the input file), ${problems.length} problems, ${seconds} s`,
    );
    expectNoProblems(problems);
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
});

const SUMMARY_SAMPLE_STRIDE = 8;

test(`summaries of every ${SUMMARY_SAMPLE_STRIDE}th model agree with the native bb inspect, as text and JSON`, async () => {
  const tool = await nativeTool();
  const sample = onnxNodeModels().filter((_, index) => index % SUMMARY_SAMPLE_STRIDE === 0);
  const bb = await loadBb(wasmBytes());
  const problems: string[] = [];
  await forEachLimited(sample, availableParallelism(), async (path) => {
    const name = basename(dirname(path));
    const model = OnnxModel.decode(bb, await readFile(path));
    try {
      for (const json of [false, true]) {
        const native = await runNative(tool, ['inspect', path, ...(json ? ['--json'] : [])]);
        if ('error' in native) problems.push(`${name}: native bb inspect failed: ${native.error}`);
        else if (json ? !isDeepStrictEqual(JSON.parse(native.stdout), model.summary()) : native.stdout !== model.summaryText())
          problems.push(`${name}: the ${json ? 'JSON' : 'text'} summaries differ`);
      }
    } finally {
      model.free();
    }
  });
  console.log(`summaries: ${sample.length} models compared as text and JSON, ${problems.length} problems`);
  expectNoProblems(problems);
});
