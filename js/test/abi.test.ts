import { beforeAll, beforeEach, describe, expect, test } from 'vitest';

import { BbErrorCode, loadBb, OnnxModel, type Bb } from '../src/index.js';
import { BB_WASM_ABI_VERSION } from '../src/internals.js';
import { addModel, BB_WASM_MAX_HANDLES, BB_WASM_SLOT_BITS, bbErrorOf, headerVersion, wasmBytes } from './support.js';

const SLOT_BITS = BB_WASM_SLOT_BITS;
const MAX_HANDLES = BB_WASM_MAX_HANDLES;

let module: WebAssembly.Module;
let bb: Bb;

beforeAll(async () => {
  module = await WebAssembly.compile(wasmBytes());
});

// Every test gets its own instance, so handle numbers and the table's fill are its own.
beforeEach(async () => {
  bb = await loadBb(module);
});

/** The raw error record after a call. */
function lastError(): { code: number; message: string } {
  return { code: bb.exports.bb_wasm_last_error_code(), message: bb.readCString(bb.exports.bb_wasm_last_error()) };
}

describe('module identity', () => {
  test(`reports the C version and ABI ${BB_WASM_ABI_VERSION}`, () => {
    expect(bb.version).toBe(headerVersion());
    expect(bb.exports.bb_wasm_abi_version()).toBe(BB_WASM_ABI_VERSION);
  });
});

describe('memory and results', () => {
  test('alloc gives distinct usable pointers, also for zero bytes', () => {
    const a = bb.exports.bb_wasm_alloc(0) >>> 0;
    const b = bb.exports.bb_wasm_alloc(0) >>> 0;
    const c = bb.exports.bb_wasm_alloc(100) >>> 0;
    expect(a).not.toBe(0);
    expect(new Set([a, b, c]).size).toBe(3);
    bb.memory().fill(0xab, c, c + 100);
    expect(bb.memory()[c + 99]).toBe(0xab);
    for (const ptr of [a, b, c]) bb.exports.bb_wasm_free(ptr);
  });

  test('an impossible allocation returns NULL and records NoMem', () => {
    expect(bb.exports.bb_wasm_alloc(0xffff_fff0)).toBe(0);
    expect(lastError().code).toBe(BbErrorCode.NoMem);
    expect(lastError().message).toMatch(/4294967280 bytes/);
  });

  test('the result buffer is empty after a failed call and replaced by the next result', () => {
    const model = OnnxModel.decode(bb, addModel());
    const encoded = model.encode();
    expect(bb.exports.bb_wasm_result_len() >>> 0).toBe(encoded.length);
    const text = model.summaryText();
    expect(bb.exports.bb_wasm_result_len() >>> 0).toBe(new TextEncoder().encode(text).length);
    expect(bb.exports.bb_wasm_model_encode(-3)).toBe(BbErrorCode.InvalidArgument);
    expect(bb.exports.bb_wasm_result_len()).toBe(0);
    expect(bb.exports.bb_wasm_result_ptr()).toBe(0);
    model.free();
  });

  test('results stay correct when the memory grows between calls', () => {
    const model = OnnxModel.decode(bb, addModel());
    const before = model.encode();
    const staleView = bb.memory();
    const pagesBefore = bb.exports.memory.buffer.byteLength;
    const big = bb.exports.bb_wasm_alloc(64 << 20) >>> 0;
    expect(big).not.toBe(0);
    expect(bb.exports.memory.buffer.byteLength).toBeGreaterThan(pagesBefore);
    expect(staleView.byteLength).toBe(0); // the old buffer was detached by the growth
    expect(model.encode()).toEqual(before);
    expect(OnnxModel.decode(bb, before).encode()).toEqual(before);
    bb.exports.bb_wasm_free(big);
    model.free();
  });
});

describe('models', () => {
  test('decode, encode and decode again give the same bytes', () => {
    const first = OnnxModel.decode(bb, addModel());
    const encoded = first.encode();
    const second = OnnxModel.decode(bb, encoded.buffer as ArrayBuffer);
    expect(second.encode()).toEqual(encoded);
    first.free();
    second.free();
  });

  test('zero bytes are an empty model, which encodes to zero bytes', () => {
    const model = OnnxModel.decode(bb, new Uint8Array(0));
    expect(model.encode()).toEqual(new Uint8Array(0));
    expect(model.summaryText()).toMatch(/^model:/);
    model.free();
  });

  test('summary as an object and as text names the graph contents', () => {
    const model = OnnxModel.decode(bb, addModel());
    expect(model.summaryText()).toContain('Add');
    const summary = model.summary();
    expect(summary.graph?.ops).toEqual([{ domain: 'ai.onnx', op_type: 'Add', count: 1 }]);
    expect(summary.graph?.inputs.map((i) => i.name)).toEqual(['x', 'y']);
    expect(summary.opset_import.length).toBeGreaterThan(0);
    model.free();
  });

  test('a success clears the previous error', () => {
    bbErrorOf(() => OnnxModel.decode(bb, new Uint8Array([0xff, 0xff, 0xff])));
    expect(lastError().code).toBeLessThan(0);
    OnnxModel.decode(bb, addModel()).free();
    expect(lastError()).toEqual({ code: 0, message: '' });
  });
});

describe('bad input is an error with a reason', () => {
  test('garbage bytes are Malformed, and the message says what was wrong', () => {
    const error = bbErrorOf(() => OnnxModel.decode(bb, new Uint8Array([0xff, 0xff, 0xff, 0xff])));
    expect(error.code).toBe(BbErrorCode.Malformed);
    expect(error.codeName).toBe('Malformed');
    // What and where: the message, the byte offset.
    expect(error.message).toMatch(/^model decode: ModelProto at byte 0: \S/);
    expect(error.fatal).toBe(false);
  });

  test('a truncated model is Malformed', () => {
    const bytes = addModel();
    const error = bbErrorOf(() => OnnxModel.decode(bb, bytes.subarray(0, bytes.length - 5)));
    expect(error.code).toBe(BbErrorCode.Malformed);
    expect(error.message).toMatch(/^model decode: .* at byte [1-9]\d*: \S/);
  });
});

describe('handles', () => {
  test('a freed handle is rejected as stale, by the ABI and by OnnxModel', () => {
    const model = OnnxModel.decode(bb, addModel());
    const handle = model.handle;
    model.free();
    expect(model.freed).toBe(true);
    model.free(); // a second free is a no-op

    for (const call of [
      () => bb.exports.bb_wasm_model_encode(handle),
      () => bb.exports.bb_wasm_model_summary(handle, 0),
      () => bb.exports.bb_wasm_model_free(handle),
    ]) {
      expect(call()).toBe(BbErrorCode.InvalidArgument);
      expect(lastError().message).toBe(
        `model handle ${handle} is stale or unknown: its object was freed, or it was never issued`,
      );
    }
    const error = bbErrorOf(() => model.encode());
    expect(error.code).toBe(BbErrorCode.InvalidArgument);
    expect(error.message).toBe('OnnxModel.encode: the model was freed');
  });

  test('zero, negative and never-issued handles are rejected', () => {
    const model = OnnxModel.decode(bb, addModel());
    const neverIssued = model.handle + (5 << SLOT_BITS);
    for (const handle of [0, -1, -2147483648, neverIssued, 2147483647]) {
      expect(bb.exports.bb_wasm_model_encode(handle)).toBe(BbErrorCode.InvalidArgument);
      expect(lastError().message).toMatch(new RegExp(`^model handle ${handle} is`));
    }
    model.free();
  });

  test('a freed slot is reused under a new handle, and the old one stays dead', () => {
    const first = OnnxModel.decode(bb, addModel());
    const oldHandle = first.handle;
    first.free();
    const second = OnnxModel.decode(bb, addModel());
    expect(second.handle).toBeGreaterThan(0);
    expect(second.handle).not.toBe(oldHandle);
    expect(second.handle & (MAX_HANDLES - 1)).toBe(oldHandle & (MAX_HANDLES - 1));
    expect(bb.exports.bb_wasm_model_encode(oldHandle)).toBe(BbErrorCode.InvalidArgument);
    expect(second.encode().length).toBeGreaterThan(0);
    second.free();
  });

  test(`the table holds ${MAX_HANDLES} objects, then says Limit until one is freed`, () => {
    const bytes = addModel();
    const models = Array.from({ length: MAX_HANDLES }, () => OnnxModel.decode(bb, bytes));
    expect(new Set(models.map((m) => m.handle)).size).toBe(MAX_HANDLES);

    const error = bbErrorOf(() => OnnxModel.decode(bb, bytes));
    expect(error.code).toBe(BbErrorCode.Limit);
    expect(error.message).toContain(`all ${MAX_HANDLES} handles are in use`);

    models[100]?.free();
    const replacement = OnnxModel.decode(bb, bytes);
    expect(replacement.encode()).toEqual(models[0]?.encode());
    replacement.free();
    for (const model of models) model.free();
  });
});
