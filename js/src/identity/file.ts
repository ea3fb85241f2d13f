/**
 * Identities kept in a file (Node): the 68 bytes of {@link Identity.export}, readable by
 * the owner only.
 */
import { readFile, writeFile } from 'node:fs/promises';

import { Identity } from './identity.js';

/** The identity in the file at `path`, made and written there (mode 0600) if there is none. */
export async function loadIdentityFile(path: string): Promise<Identity> {
  try {
    return await Identity.import(await readFile(path));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw new Error(`identity file ${path}: ${(error as Error).message}`);
  }
  const identity = await Identity.generate({ extractable: true });
  try {
    await writeFile(path, await identity.export(), { mode: 0o600, flag: 'wx' });
    return identity;
  } catch (error) {
    // another process made it first: use that one
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return Identity.import(await readFile(path));
    throw error;
  }
}

/** Writes `identity` to `path` (mode 0600), replacing what is there. */
export async function saveIdentityFile(identity: Identity, path: string): Promise<void> {
  await writeFile(path, await identity.export(), { mode: 0o600 });
}
