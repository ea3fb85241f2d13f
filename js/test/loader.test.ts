import { existsSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';

import { BbLoadError, loadBb, OnnxModel, type Bb, type WasmSource } from '../src/index.js';
import { BB_WASM_ABI_VERSION, BB_WASM_FUNCTION_ARITY } from '../src/engine/abi.js';
import { addModel, headerVersion, packageRoot, wasmBytes, wasmPath } from './support.js';

/** A loaded module must be initialised, speak this package's ABI, and decode and encode a real model. */
function expectWorking(bb: Bb): void {
  expect(bb.version).toBe(headerVersion());
  expect(bb.abiVersion).toBe(BB_WASM_ABI_VERSION);
  const model = OnnxModel.decode(bb, addModel());
  try {
    expect(model.encode().length).toBeGreaterThan(0);
  } finally {
    model.free();
  }
}

// Hand-assembled modules: the 8-byte header, then sections.
const WASM_HEADER = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00];
const EMPTY_MODULE = new Uint8Array(WASM_HEADER);
// (type (func)) (import "env" "nope" (func (type 0)))
const MODULE_IMPORTING_ENV_NOPE = new Uint8Array([
  ...WASM_HEADER,
  ...[0x01, 0x04, 0x01, 0x60, 0x00, 0x00],
  ...[0x02, 0x0c, 0x01, 0x03, ...Buffer.from('env'), 0x04, ...Buffer.from('nope'), 0x00, 0x00],
]);

/** Unsigned LEB128, the integer encoding of the wasm binary format. */
function leb128(value: number): number[] {
  const out: number[] = [];
  do {
    let byte = value & 0x7f;
    value >>>= 7;
    if (value !== 0) byte |= 0x80;
    out.push(byte);
  } while (value !== 0);
  return out;
}

const section = (id: number, body: number[]): number[] => [id, ...leb128(body.length), ...body];
const vector = (items: number[][]): number[] => [...leb128(items.length), ...items.flat()];
const name = (text: string): number[] => [...leb128(text.length), ...Buffer.from(text)];

/**
 * A module that exports a memory and the given functions, each taking `arity` i32
 * parameters and returning the i32 `result`: enough to look like bb.wasm to the loader.
 */
function fakeModule(functions: Record<string, number>, result: number): Uint8Array {
  const entries = Object.entries(functions);
  const I32 = 0x7f;
  const maxArity = Math.max(...Object.values(functions));
  // Type i takes i parameters, so a function's type index is its arity.
  const types = Array.from({ length: maxArity + 1 }, (_, arity) => [0x60, ...vector(Array.from({ length: arity }, () => [I32])), 1, I32]);
  const body = [0x00, 0x41, ...leb128(result), 0x0b]; // no locals; i32.const result; end
  return new Uint8Array([
    ...WASM_HEADER,
    ...section(1, vector(types)),
    ...section(3, vector(entries.map(([, arity]) => leb128(arity)))),
    ...section(5, vector([[0x00, 0x01]])), // one memory of at least one page
    ...section(7, vector([[...name('memory'), 0x02, 0x00], ...entries.map(([fn], i) => [...name(fn), 0x00, ...leb128(i)])])),
    ...section(10, vector(entries.map(() => [...leb128(body.length), ...body]))),
  ]);
}

describe('loadBb in Node', () => {
  test('with no source loads the module beside the package', async () => {
    wasmBytes(); // a clear failure when the module was not built
    expectWorking(await loadBb());
  });

  test('from a Uint8Array, an ArrayBuffer and a view with an offset', async () => {
    const bytes = wasmBytes();
    expectWorking(await loadBb(bytes));
    expectWorking(await loadBb(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength)));
    const padded = new Uint8Array(bytes.length + 7);
    padded.set(bytes, 3);
    expectWorking(await loadBb(new DataView(padded.buffer, 3, bytes.length)));
  });

  test('from a file URL, a file URL string and a path', async () => {
    expectWorking(await loadBb(pathToFileURL(wasmPath)));
    expectWorking(await loadBb(pathToFileURL(wasmPath).href));
    expectWorking(await loadBb(wasmPath));
  });

  test('from a Response, streamed when served as application/wasm, buffered otherwise', async () => {
    const bytes = wasmBytes();
    expectWorking(await loadBb(new Response(bytes, { headers: { 'content-type': 'application/wasm' } })));
    expectWorking(await loadBb(new Response(bytes, { headers: { 'content-type': 'application/octet-stream' } })));
    expectWorking(await loadBb(Promise.resolve(new Response(bytes))));
  });

  test('from a precompiled WebAssembly.Module, more than once', async () => {
    const module = await WebAssembly.compile(wasmBytes());
    const first = await loadBb(module);
    const second = await loadBb(module);
    expectWorking(first);
    expectWorking(second);
    // Two instances share nothing: a handle from one means nothing to the other.
    const model = OnnxModel.decode(first, addModel());
    expect(second.exports.bb_wasm_model_free(model.handle)).toBe(-1);
    model.free();
  });

  test('the package exports map points at the same module', () => {
    const require = createRequire(import.meta.url);
    expect(require.resolve('bytesandbrains/bb.wasm')).toBe(wasmPath);
  });

  test('the built package (dist/) finds its module by default', async () => {
    const built = join(packageRoot, 'dist', 'index.js');
    if (!existsSync(built)) throw new Error(`${built} is missing: run \`npm run build\` (npm test does)`);
    const entry: { loadBb: (source?: WasmSource) => Promise<Bb> } = await import(
      pathToFileURL(built).href
    );
    const bb = await entry.loadBb();
    expect(bb.version).toBe(headerVersion());
  });
});

describe('loadBb over HTTP', () => {
  let server: Server;
  let base: string;

  beforeAll(async () => {
    const bytes = wasmBytes();
    server = createServer((request, response) => {
      if (request.url === '/bb.wasm') {
        response.writeHead(200, { 'content-type': 'application/wasm' }).end(bytes);
      } else if (request.url === '/plain/bb.wasm') {
        response.writeHead(200, { 'content-type': 'text/plain' }).end(bytes);
      } else {
        response.writeHead(404, 'Not Found').end();
      }
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    await new Promise<void>((resolve, reject) => server.close((error) => (error ? reject(error) : resolve())));
  });

  test('from an http URL, a URL string and fetch()', async () => {
    expectWorking(await loadBb(new URL('/bb.wasm', base)));
    expectWorking(await loadBb(`${base}/plain/bb.wasm`));
    expectWorking(await loadBb(fetch(`${base}/bb.wasm`)));
  });

  test('a missing module is a BbLoadError naming the status', async () => {
    const failure = loadBb(`${base}/missing.wasm`);
    await expect(failure).rejects.toBeInstanceOf(BbLoadError);
    await expect(failure).rejects.toThrow(/missing\.wasm.*HTTP 404/);
  });
});

describe('loadBb refuses what it cannot use', () => {
  test('a file that does not exist', async () => {
    const path = join(packageRoot, 'wasm', 'no-such-module.wasm');
    const failure = loadBb(path);
    await expect(failure).rejects.toBeInstanceOf(BbLoadError);
    await expect(failure).rejects.toThrow(/no-such-module\.wasm.*ENOENT/);
  });

  test('bytes that are not WebAssembly', async () => {
    const failure = loadBb(new TextEncoder().encode('not a module'));
    await expect(failure).rejects.toBeInstanceOf(BbLoadError);
    await expect(failure).rejects.toThrow(/not a valid WebAssembly module/);
  });

  test('a module that needs an import the loader does not provide, by name', async () => {
    await expect(loadBb(MODULE_IMPORTING_ENV_NOPE)).rejects.toThrow(
      'bb.wasm needs imports this loader does not provide: env.nope (function)',
    );
  });

  test('a module that speaks another ABI version', async () => {
    const other = BB_WASM_ABI_VERSION + 1;
    const failure = loadBb(fakeModule(BB_WASM_FUNCTION_ARITY, other));
    await expect(failure).rejects.toBeInstanceOf(BbLoadError);
    await expect(failure).rejects.toThrow(
      `bb.wasm implements ABI version ${other}, but this package speaks version ${BB_WASM_ABI_VERSION}`,
    );
    // The same module answering the package's version is accepted: the version is all that was wrong.
    await expect(loadBb(fakeModule(BB_WASM_FUNCTION_ARITY, BB_WASM_ABI_VERSION))).resolves.toBeDefined();
  });

  test('a module whose functions take other arguments than the ABI says', async () => {
    const drifted = { ...BB_WASM_FUNCTION_ARITY, bb_wasm_model_encode: 2 };
    await expect(loadBb(fakeModule(drifted, BB_WASM_ABI_VERSION))).rejects.toThrow(
      'this module is not bb.wasm, or not the version this package expects: bb_wasm_model_encode takes 2 arguments, not 1',
    );
  });

  test('a module without the ABI, listing what is missing', async () => {
    const failure = loadBb(EMPTY_MODULE);
    await expect(failure).rejects.toBeInstanceOf(BbLoadError);
    await expect(failure).rejects.toThrow(/memory is not exported; _initialize is not exported;.*bb_wasm_model_free is not exported/);
  });
});
