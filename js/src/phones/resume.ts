/**
 * Resume after a reload or a crash: a node's state kept at safe points and brought back on
 * the next load, under the same identity. What is kept is a record (`encodeSavedNode`):
 * the engine's snapshot (every part of the node and each component's state — a model's
 * parameters, a codec's residual, the address book, the request counter peers check for
 * replays) with what it was saved from — the peer id, the partitions, the artifact's
 * SHA-256 and, when asked, the artifact and ONNX models themselves, so a page whose
 * artifact is still current resumes without downloading them again — and the node's
 * clock, so its timers and deadlines carry on where they were.
 *
 * ```ts
 * const store = indexedDbStore();                          // or memoryStore(), fileStore (Node)
 * const saved = await readSavedNode(store, key);           // undefined, or a checked record
 * const { node, clock } = saved && saved.artifactSha256 === current
 *   ? await resumeNode(bb, saved, { self: identity.peerId, slots: { data: { dataset } } })
 *   : { node: freshInstall(), clock: monotonicNowNs };
 * const keeper = keepNode(node, { store, key, artifact, clock });   // saves at safe points
 * await connectPeer(node, { url, room, identity, clock });
 * ```
 *
 * A record read back is untrusted: anything that can write the browser profile (or the
 * server's disk) can change it. Decoding checks every length and field and a SHA-256 over
 * the whole (a damaged record is refused); resumeNode refuses a record saved by another
 * peer, for other partitions or another artifact, each with a BbError saying which; and
 * the engine's restore checks every part of the snapshot itself, so a record forged with a
 * matching digest still cannot crash it (tests/roles/test_roles_client_restore.c).
 */
import type { Bb } from '../engine/bb.js';
import type { Clock } from '../node/driver.js';
import { BbError, BbErrorCode } from '../engine/errors.js';
import { concatBytes } from '../identity/bytes.js';
import { BbNode, monotonicNowNs, type NodeAdmission, type SlotOptions } from '../node/node.js';

/** Where saved records live. */
export interface StateStore {
  get(key: string): Promise<Uint8Array | undefined>;
  put(key: string, bytes: Uint8Array): Promise<void>;
  delete(key: string): Promise<void>;
}

/** A saved node, as decodeSavedNode checked it. */
export interface SavedNode {
  readonly peerId: string;
  readonly targets: readonly string[];
  /** The artifact's SHA-256, lowercase hex. */
  readonly artifactSha256: string;
  /** The node's clock when it was saved (ns). */
  readonly clockNs: bigint;
  /** Wall-clock time of the save (ms since 1970). */
  readonly savedAtMs: number;
  /** The artifact itself, when it was kept. */
  readonly artifact?: Uint8Array;
  /** ONNX models handed to slots at install, when they were kept. */
  readonly models: Readonly<Record<string, Uint8Array>>;
  /** The engine's snapshot (bb_node_snapshot). */
  readonly snapshot: Uint8Array;
}

const MAGIC = [0x42, 0x42, 0x53, 0x56]; // "BBSV"
const VERSION = 1;
const MAX_TEXT = 1024;
const MAX_LIST = 64;
const DIGEST_BYTES = 32;

async function sha256(bytes: Uint8Array): Promise<Uint8Array> {
  return new Uint8Array(await globalThis.crypto.subtle.digest('SHA-256', bytes as Uint8Array<ArrayBuffer>));
}

const hex = (bytes: Uint8Array): string => Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');

/** The artifact's SHA-256 as resumeNode compares it. */
export async function artifactSha256(artifact: Uint8Array): Promise<string> {
  return hex(await sha256(artifact));
}

/**
 * The record's bytes: "BBSV", u32 version 1, the peer id, u32 count and the targets, the
 * artifact's 32-byte SHA-256, u64 clock (ns), f64 save time (ms), the artifact (u32 length,
 * 0: not kept), u32 count and the (slot, model) pairs, the snapshot, then a SHA-256 of all
 * before it. Texts and byte strings are a u32 length and the bytes; little-endian.
 */
export async function encodeSavedNode(record: SavedNode): Promise<Uint8Array> {
  const utf8 = new TextEncoder();
  const parts: Uint8Array[] = [new Uint8Array(MAGIC), u32(VERSION), text(utf8, record.peerId), u32(record.targets.length)];
  for (const target of record.targets) parts.push(text(utf8, target));
  const digest = fromHex(record.artifactSha256);
  if (digest === undefined) throw new BbError(BbErrorCode.InvalidArgument, 'saved node: artifactSha256 is not 64 hex digits');
  const clock = new Uint8Array(16);
  const view = new DataView(clock.buffer);
  view.setBigUint64(0, BigInt.asUintN(64, record.clockNs), true);
  view.setFloat64(8, record.savedAtMs, true);
  parts.push(digest, clock, blob(record.artifact ?? new Uint8Array(0)));
  const models = Object.entries(record.models);
  parts.push(u32(models.length));
  for (const [slot, bytes] of models) parts.push(text(utf8, slot), blob(bytes));
  parts.push(blob(record.snapshot));
  const body = concatBytes(...parts);
  return concatBytes(body, await sha256(body));
}

/** Reads a record, checking every field; a BbError (Malformed, Unsupported) says what is wrong and where. */
export async function decodeSavedNode(bytes: Uint8Array): Promise<SavedNode> {
  const bad = (what: string, at: number): never => {
    throw new BbError(BbErrorCode.Malformed, `saved node: ${what} (byte ${at} of ${bytes.length})`);
  };
  if (bytes.length < MAGIC.length + 4 + DIGEST_BYTES || MAGIC.some((b, i) => bytes[i] !== b)) bad('not a saved node record', 0);
  const body = bytes.subarray(0, bytes.length - DIGEST_BYTES);
  const digest = await sha256(body);
  if (digest.some((b, i) => bytes[body.length + i] !== b)) bad('the SHA-256 at the end does not match: the record was damaged or changed', body.length);
  const view = new DataView(body.buffer, body.byteOffset, body.byteLength);
  const utf8 = new TextDecoder('utf-8', { fatal: true });
  let at = MAGIC.length;
  const need = (n: number, what: string): void => {
    if (n > body.length - at) bad(`${what} runs past the end`, at);
  };
  const readU32 = (what: string): number => {
    need(4, what);
    const v = view.getUint32(at, true);
    at += 4;
    return v;
  };
  const readBlob = (what: string, max = body.length): Uint8Array => {
    const len = readU32(`the length of ${what}`);
    if (len > max) bad(`${what} is ${len} bytes, more than ${max}`, at - 4);
    need(len, what);
    const out = body.slice(at, at + len);
    at += len;
    return out;
  };
  const readText = (what: string): string => {
    const start = at;
    try {
      return utf8.decode(readBlob(what, MAX_TEXT));
    } catch (error) {
      if (error instanceof BbError) throw error;
      return bad(`${what} is not UTF-8`, start);
    }
  };
  const version = readU32('the version');
  if (version !== VERSION) throw new BbError(BbErrorCode.Unsupported, `saved node: version ${version}; this package reads version ${VERSION}`);
  const peerId = readText('the peer id');
  const nTargets = readU32('the target count');
  if (nTargets > MAX_LIST) bad(`${nTargets} targets, more than ${MAX_LIST}`, at - 4);
  const targets = Array.from({ length: nTargets }, (_, i) => readText(`target ${i}`));
  need(DIGEST_BYTES + 16, 'the artifact digest and clock');
  const artifactSha256 = hex(body.subarray(at, at + DIGEST_BYTES));
  at += DIGEST_BYTES;
  const clockNs = view.getBigUint64(at, true);
  const savedAtMs = view.getFloat64(at + 8, true);
  if (!Number.isFinite(savedAtMs)) bad('the save time is not a number', at + 8);
  at += 16;
  const artifact = readBlob('the artifact');
  const nModels = readU32('the model count');
  if (nModels > MAX_LIST) bad(`${nModels} models, more than ${MAX_LIST}`, at - 4);
  const models: Record<string, Uint8Array> = {};
  for (let i = 0; i < nModels; i++) {
    const slot = readText(`the slot of model ${i}`);
    if (slot in models) bad(`slot ${slot} holds two models`, at);
    models[slot] = readBlob(`the model of slot ${slot}`);
  }
  const snapshot = readBlob('the snapshot');
  if (at !== body.length) bad(`${body.length - at} bytes after the snapshot`, at);
  return { peerId, targets, artifactSha256, clockNs, savedAtMs, ...(artifact.length > 0 ? { artifact } : {}), models, snapshot };
}

/** Reads and checks the record at `key`: undefined when there is none; a BbError when it is damaged. */
export async function readSavedNode(store: StateStore, key: string): Promise<SavedNode | undefined> {
  const bytes = await store.get(key);
  return bytes === undefined ? undefined : decodeSavedNode(bytes);
}

export interface SaveOptions {
  readonly store: StateStore;
  /** Where the record goes (one per node: e.g. the room and the peer id). */
  readonly key: string;
  /** The artifact the node was installed from. */
  readonly artifact: Uint8Array;
  /** Keep the artifact itself in the record, so a resume needs no download (default true). */
  readonly keepArtifact?: boolean;
  /** ONNX models handed to slots at install, kept likewise. */
  readonly models?: Readonly<Record<string, Uint8Array>>;
  /** The node's clock (the PollDriver's): what time the record says it is. Default monotonicNowNs. */
  readonly clock?: Clock;
}

/**
 * Saves the node now (a BbError InvalidArgument while it has work: save between polls).
 * Returns the record's size in bytes.
 */
export async function saveNode(node: BbNode, options: SaveOptions): Promise<number> {
  const snapshot = node.snapshot();
  const record = await encodeSavedNode({
    peerId: node.self,
    targets: node.targets,
    artifactSha256: await artifactSha256(options.artifact),
    clockNs: (options.clock ?? monotonicNowNs)(),
    savedAtMs: Date.now(),
    ...(options.keepArtifact === false ? {} : { artifact: options.artifact }),
    models: options.models ?? {},
    snapshot,
  });
  await options.store.put(options.key, record);
  return record.length;
}

export interface ResumeOptions {
  /** The identity the node must have been saved under (its peer id). */
  readonly self: string;
  /** The artifact to resume with; default the record's own (a BbError when it kept none). */
  readonly artifact?: Uint8Array;
  /** Slots as at install: the data set, config overrides (models default to the record's). */
  readonly slots?: Readonly<Record<string, SlotOptions>>;
  readonly seed?: bigint | number;
  readonly admission?: NodeAdmission;
}

/** A node resumed from a record, and the clock to drive it with. */
export interface Resumed {
  readonly node: BbNode;
  /** The node's clock going on from where it was saved (pass it to the PollDriver or connectPeer). */
  readonly clock: Clock;
}

/**
 * Restores a saved record into `node`, freshly installed from the same artifact for the same
 * partitions under the same peer id (a BbError Denied naming what differs; the engine's own
 * error when the snapshot does not restore, leaving the node as installed). Returns the
 * clock to drive it with, continuing the saved one: time does not run backwards for the
 * node, whatever the monotonic clock of this process says.
 */
export async function restoreSaved(node: BbNode, saved: SavedNode, artifact: Uint8Array): Promise<Clock> {
  if (saved.peerId !== node.self) throw new BbError(BbErrorCode.Denied, `restore: the saved node is peer ${saved.peerId}, not ${node.self}`);
  if ((await artifactSha256(artifact)) !== saved.artifactSha256) {
    throw new BbError(BbErrorCode.Denied, `restore: the saved node ran artifact ${saved.artifactSha256.slice(0, 16)}…, not this one`);
  }
  if (node.targets.join('\n') !== saved.targets.join('\n')) {
    throw new BbError(BbErrorCode.Denied, `restore: the saved node ran ${saved.targets.join(', ')}, this node ${node.targets.join(', ')}`);
  }
  node.restore(saved.snapshot);
  const offset = saved.clockNs - monotonicNowNs();
  return offset > 0n ? () => monotonicNowNs() + offset : monotonicNowNs;
}

/**
 * Installs a node from a saved record (its artifact and models unless given) and restores
 * it (restoreSaved): the page's resume after a reload.
 */
export async function resumeNode(bb: Bb, saved: SavedNode, options: ResumeOptions): Promise<Resumed> {
  if (saved.peerId !== options.self) {
    throw new BbError(BbErrorCode.Denied, `resume: the saved node is peer ${saved.peerId}, not ${options.self}`);
  }
  const artifact = options.artifact ?? saved.artifact;
  if (artifact === undefined) throw new BbError(BbErrorCode.InvalidArgument, 'resume: the record kept no artifact; pass options.artifact');
  const slots: Record<string, SlotOptions> = {};
  for (const [slot, model] of Object.entries(saved.models)) slots[slot] = { model };
  for (const [slot, given] of Object.entries(options.slots ?? {})) slots[slot] = { ...slots[slot], ...given };
  const node = BbNode.install(bb, {
    artifact,
    targets: saved.targets.map((t) => t.split('#')[0]!),
    self: options.self,
    slots,
    ...(options.seed === undefined ? {} : { seed: options.seed }),
    ...(options.admission === undefined ? {} : { admission: options.admission }),
  });
  try {
    return { node, clock: await restoreSaved(node, saved, artifact) };
  } catch (error) {
    node.free();
    throw error;
  }
}

export interface KeepOptions extends SaveOptions {
  /** Least time between two saves (default 1000 ms). */
  readonly minIntervalMs?: number;
  /** A save that failed (the store refused, say); the keeper tries again at the next safe point. */
  readonly onError?: (error: unknown) => void;
}

/** A node kept at its safe points. */
export interface Keeper {
  /** Saves as soon as the node is idle, whatever the interval (e.g. on pagehide). */
  flush(): Promise<void>;
  readonly stats: { readonly saves: number; readonly bytes: number; readonly failures: number };
  /** Stops saving; resolves once a save under way has finished. */
  stop(): Promise<void>;
}

/**
 * Saves the node at safe points: once the node is idle after a poll that sent something (an
 * update left, a round moved on), at most every minIntervalMs, and on flush(). In a page
 * it also flushes when the page is hidden (`pagehide`, `visibilitychange`), best effort:
 * the browser may not finish a write on the way out, which is why the keeper saves as it
 * goes.
 */
export function keepNode(node: BbNode, options: KeepOptions): Keeper {
  const minInterval = options.minIntervalMs ?? 1000;
  const stats = { saves: 0, bytes: 0, failures: 0 };
  let lastSave = -Infinity;
  let due = false;
  let saving: Promise<void> | undefined;
  let stopped = false;
  const attempt = (force: boolean): Promise<void> => {
    if (stopped || saving !== undefined || node.freed) return saving ?? Promise.resolve();
    const now = performance.now();
    if (!force && now - lastSave < minInterval) return Promise.resolve();
    if (node.hasWork()) return Promise.resolve(); // not a safe point: the next step tries again
    due = false;
    lastSave = now;
    saving = saveNode(node, options)
      .then((bytes) => {
        stats.saves++;
        stats.bytes = bytes;
      })
      .catch((error: unknown) => {
        stats.failures++;
        due = true;
        options.onError?.(error);
      })
      .finally(() => (saving = undefined));
    return saving;
  };
  const unStep = node.onStep((step) => {
    if (step.kind !== 'send' && !due) return;
    due = true;
    // after the poll that produced the step has returned
    setTimeout(() => void (due && attempt(false)), 0);
  });
  const g = globalThis as { addEventListener?: (type: string, listener: () => void) => void; removeEventListener?: (type: string, listener: () => void) => void; document?: { visibilityState?: string } };
  const onHide = (): void => {
    if (g.document?.visibilityState === undefined || g.document.visibilityState === 'hidden') void attempt(true);
  };
  for (const type of ['pagehide', 'visibilitychange']) g.addEventListener?.(type, onHide);
  return {
    flush: () => attempt(true),
    stats,
    async stop() {
      stopped = true;
      unStep();
      for (const type of ['pagehide', 'visibilitychange']) g.removeEventListener?.(type, onHide);
      await saving;
    },
  };
}

/** Records in memory (tests, and pages that only want resume within one load). */
export function memoryStore(): StateStore {
  const map = new Map<string, Uint8Array>();
  return {
    get: async (key) => map.get(key)?.slice(),
    put: async (key, bytes) => void map.set(key, bytes.slice()),
    delete: async (key) => void map.delete(key),
  };
}

interface IdbRequest<T> {
  result: T;
  error: unknown;
  onsuccess: (() => void) | null;
  onerror: (() => void) | null;
}
interface IdbDatabase {
  objectStoreNames: { contains(name: string): boolean };
  createObjectStore(name: string): unknown;
  transaction(name: string, mode: 'readonly' | 'readwrite'): { objectStore(name: string): IdbStore };
}
interface IdbStore {
  get(key: string): IdbRequest<unknown>;
  put(value: unknown, key: string): IdbRequest<unknown>;
  delete(key: string): IdbRequest<unknown>;
}
interface IdbFactory {
  open(name: string, version: number): IdbRequest<IdbDatabase> & { onupgradeneeded: (() => void) | null };
}

/** Records in the page's IndexedDB (database `database`, object store "nodes"). */
export function indexedDbStore(database = 'bytesandbrains-state'): StateStore {
  const factory = (globalThis as { indexedDB?: IdbFactory }).indexedDB;
  if (factory === undefined) throw new BbError(BbErrorCode.Unsupported, 'indexedDbStore: this environment has no IndexedDB');
  const done = <T>(request: IdbRequest<T>): Promise<T> =>
    new Promise((resolve, reject) => {
      request.onsuccess = () => resolve(request.result);
      request.onerror = () => reject(request.error);
    });
  let opened: Promise<IdbDatabase> | undefined;
  const db = (): Promise<IdbDatabase> => {
    if (opened !== undefined) return opened;
    const request = factory.open(database, 1);
    request.onupgradeneeded = () => {
      if (!request.result.objectStoreNames.contains('nodes')) request.result.createObjectStore('nodes');
    };
    return (opened = done(request));
  };
  const store = async (mode: 'readonly' | 'readwrite'): Promise<IdbStore> => (await db()).transaction('nodes', mode).objectStore('nodes');
  return {
    async get(key) {
      const value = await done((await store('readonly')).get(key));
      if (value === undefined) return undefined;
      // what a page reads back is whatever the profile holds: only bytes are taken
      if (!(value instanceof Uint8Array)) throw new BbError(BbErrorCode.Malformed, `saved node: the record at ${key} is not bytes`);
      return value;
    },
    async put(key, bytes) {
      await done((await store('readwrite')).put(bytes, key));
    },
    async delete(key) {
      await done((await store('readwrite')).delete(key));
    },
  };
}

function u32(v: number): Uint8Array {
  const out = new Uint8Array(4);
  new DataView(out.buffer).setUint32(0, v, true);
  return out;
}
function blob(bytes: Uint8Array): Uint8Array {
  return concatBytes(u32(bytes.length), bytes);
}
function text(utf8: TextEncoder, s: string): Uint8Array {
  const bytes = utf8.encode(s);
  if (bytes.length > MAX_TEXT) throw new BbError(BbErrorCode.InvalidArgument, `saved node: a text of ${bytes.length} bytes, more than ${MAX_TEXT}`);
  return blob(bytes);
}
function fromHex(s: string): Uint8Array | undefined {
  if (!/^[0-9a-f]{64}$/.test(s)) return undefined;
  return Uint8Array.from({ length: 32 }, (_, i) => parseInt(s.slice(2 * i, 2 * i + 2), 16));
}
