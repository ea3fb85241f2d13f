/**
 * Identities kept in a file (Node): the 68 bytes of {@link Identity.export}, readable by
 * the owner only.
 *
 * A file appears whole or not at all: its bytes are written to a private file beside it,
 * which is then linked (when made) or renamed (when replaced) into place, so a process that
 * reads the path never sees a file half written, and of several processes that make the
 * same file at once, one wins and the others read what it wrote.
 */
import { randomBytes } from 'node:crypto';
import { link, readFile, rename, unlink, writeFile } from 'node:fs/promises';

import { Identity } from './identity.js';

/** The identity in the file at `path`, made and written there (mode 0600) if there is none. */
export async function loadIdentityFile(path: string): Promise<Identity> {
  const existing = await readIdentityFile(path);
  if (existing) return existing;
  const identity = await Identity.generate({ extractable: true });
  const staged = await stage(path, await identity.export());
  try {
    await link(staged, path);
    return identity;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw new Error(`identity file ${path}: ${(error as Error).message}`);
    // another process made it first: use that one
    const made = await readIdentityFile(path);
    if (!made) throw new Error(`identity file ${path}: made by another process, then gone`);
    return made;
  } finally {
    await unlink(staged).catch(() => undefined);
  }
}

/** Writes `identity` to `path` (mode 0600), replacing what is there in one step. */
export async function saveIdentityFile(identity: Identity, path: string): Promise<void> {
  const staged = await stage(path, await identity.export());
  try {
    await rename(staged, path);
  } catch (error) {
    await unlink(staged).catch(() => undefined);
    throw new Error(`identity file ${path}: ${(error as Error).message}`);
  }
}

/** The identity at `path`, or undefined when there is no file there. */
async function readIdentityFile(path: string): Promise<Identity | undefined> {
  try {
    return await Identity.import(await readFile(path));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new Error(`identity file ${path}: ${(error as Error).message}`);
  }
}

/** `bytes` written whole (mode 0600) to a new file beside `path`, and that file's path. */
async function stage(path: string, bytes: Uint8Array): Promise<string> {
  const staged = `${path}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
  await writeFile(staged, bytes, { mode: 0o600, flag: 'wx' });
  return staged;
}
