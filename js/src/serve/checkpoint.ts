/**
 * Files the server writes whole or not at all: each is written to a new file beside its
 * place, flushed to the disk, then renamed over the old one (and the folder flushed), so a
 * kill at any moment leaves the old file or the new one, never a part of one.
 *
 * A checkpoint is `BBSERVE1`, a u32 length and a JSON header (round, accuracy, the node's
 * clock, what the run was started with), a u32 length and the server node's snapshot, then
 * the SHA-256 of everything before it.
 */
import { createHash } from 'node:crypto';
import { closeSync, fsyncSync, openSync, readFileSync, renameSync, rmSync, writeSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';

const MAGIC = new TextEncoder().encode('BBSERVE1');
const DIGEST = 32;

/** Writes `bytes` to `path` whole or not at all (see above). */
export function writeFileAtomic(path: string, bytes: Uint8Array): void {
  const temporary = join(dirname(path), `.${basename(path)}.${process.pid}.tmp`);
  const fd = openSync(temporary, 'w', 0o600);
  try {
    for (let at = 0; at < bytes.length; ) at += writeSync(fd, bytes, at, Math.min(bytes.length - at, 1 << 20));
    fsyncSync(fd);
  } catch (error) {
    closeSync(fd);
    rmSync(temporary, { force: true });
    throw error;
  }
  closeSync(fd);
  renameSync(temporary, path);
  const folder = openSync(dirname(path), 'r');
  try {
    fsyncSync(folder);
  } finally {
    closeSync(folder);
  }
}

export interface CheckpointHeader {
  readonly version: 1;
  /** The last round the server reported, and its accuracy. */
  readonly round: number;
  readonly accuracy: number;
  /** The node's clock when the snapshot was taken (ns, decimal): the resumed one continues it. */
  readonly nowNs: string;
  /** The server's peer id and a digest of the model and plan: a resume must match both. */
  readonly server: string;
  readonly plan: string;
}

export interface Checkpoint {
  readonly header: CheckpointHeader;
  readonly snapshot: Uint8Array;
}

export function encodeCheckpoint({ header, snapshot }: Checkpoint): Uint8Array {
  const json = new TextEncoder().encode(JSON.stringify(header));
  const body = new Uint8Array(MAGIC.length + 4 + json.length + 4 + snapshot.length);
  const view = new DataView(body.buffer);
  body.set(MAGIC, 0);
  view.setUint32(MAGIC.length, json.length, true);
  body.set(json, MAGIC.length + 4);
  view.setUint32(MAGIC.length + 4 + json.length, snapshot.length, true);
  body.set(snapshot, MAGIC.length + 8 + json.length);
  const out = new Uint8Array(body.length + DIGEST);
  out.set(body, 0);
  out.set(createHash('sha256').update(body).digest(), body.length);
  return out;
}

export class CheckpointError extends Error {
  override readonly name = 'CheckpointError';
}

/** Reads a checkpoint file, refusing anything but a whole one this version wrote. */
export function readCheckpoint(path: string): Checkpoint {
  let bytes: Uint8Array;
  try {
    bytes = new Uint8Array(readFileSync(path));
  } catch (error) {
    throw new CheckpointError(`checkpoint ${path}: ${(error as Error).message}`);
  }
  const fail = (why: string): never => {
    throw new CheckpointError(`checkpoint ${path} is not a whole checkpoint of this server: ${why}`);
  };
  if (bytes.length < MAGIC.length + 8 + DIGEST || !MAGIC.every((b, i) => bytes[i] === b)) fail('it does not start with BBSERVE1');
  const body = bytes.subarray(0, bytes.length - DIGEST);
  const digest = createHash('sha256').update(body).digest();
  if (!digest.equals(bytes.subarray(body.length))) fail(`its SHA-256 does not match (${bytes.length} bytes: cut short or changed)`);
  const view = new DataView(body.buffer, body.byteOffset, body.byteLength);
  const jsonLength = view.getUint32(MAGIC.length, true);
  if (MAGIC.length + 8 + jsonLength > body.length) fail('its header is longer than the file');
  let header: CheckpointHeader;
  try {
    header = JSON.parse(new TextDecoder().decode(body.subarray(MAGIC.length + 4, MAGIC.length + 4 + jsonLength))) as CheckpointHeader;
  } catch {
    return fail('its header is not JSON');
  }
  if (header.version !== 1 || typeof header.round !== 'number' || typeof header.nowNs !== 'string' || !/^\d+$/.test(header.nowNs)) fail('its header is not version 1');
  const snapshotLength = view.getUint32(MAGIC.length + 4 + jsonLength, true);
  if (MAGIC.length + 8 + jsonLength + snapshotLength !== body.length) fail('its snapshot does not fill the rest');
  return { header, snapshot: body.slice(MAGIC.length + 8 + jsonLength) };
}
