/**
 * Identities kept in the browser's IndexedDB, so a page keeps its peer id across reloads.
 * WebCrypto keys are stored as CryptoKey objects (IndexedDB clones them; a key made not
 * extractable stays so), noble keys as their seed.
 */
import type { PrivateKeyHandle } from './ed25519.js';
import { Identity, type IdentityOptions } from './identity.js';
import type { IndexedDbFactory } from '../engine/platform.js';

const DATABASE = 'bytesandbrains';
const STORE = 'identities';

export interface IdentityStoreOptions extends IdentityOptions {
  /** The IndexedDB to use (default the global one). */
  indexedDB?: IndexedDbFactory;
}

interface StoredIdentity {
  version: 1;
  privateKey: PrivateKeyHandle;
  publicKey: Uint8Array;
}

function open(factory: IDBFactory): Promise<IDBDatabase> {
  return new Promise((resolve, reject) => {
    const request = factory.open(DATABASE, 1);
    request.onupgradeneeded = () => request.result.createObjectStore(STORE);
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error ?? new Error(`cannot open IndexedDB ${DATABASE}`));
  });
}

function done<T>(request: IDBRequest<T>): Promise<T> {
  return new Promise((resolve, reject) => {
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error ?? new Error('IndexedDB request failed'));
  });
}

function factoryOf(options: IdentityStoreOptions): IDBFactory {
  const factory = (options.indexedDB as IDBFactory | undefined) ?? (globalThis as { indexedDB?: IDBFactory }).indexedDB;
  if (factory === undefined) throw new Error('no IndexedDB here: in Node keep identities in a file (bytesandbrains/identity/node)');
  return factory;
}

/**
 * The identity stored under `name`, made and stored on first use. Two pages of one origin
 * asking for the same name get the same identity (and the same peer id: the signalling
 * server lets the later join replace the earlier), so give each concurrent peer its name.
 */
export async function loadIdentity(name = 'default', options: IdentityStoreOptions = {}): Promise<Identity> {
  const db = await open(factoryOf(options));
  try {
    const stored = (await done(db.transaction(STORE).objectStore(STORE).get(name))) as StoredIdentity | undefined;
    if (stored !== undefined) return new Identity({ handle: stored.privateKey, publicKey: stored.publicKey });
    const identity = await Identity.generate({ extractable: options.extractable ?? false });
    const record: StoredIdentity = { version: 1, privateKey: identity.privateKey, publicKey: identity.publicKey };
    try {
      // add, not put: a page that made one at the same moment keeps its own, and we take it
      await done(db.transaction(STORE, 'readwrite').objectStore(STORE).add(record, name));
      return identity;
    } catch {
      const winner = (await done(db.transaction(STORE).objectStore(STORE).get(name))) as StoredIdentity | undefined;
      if (winner === undefined) throw new Error(`cannot store identity ${name} in IndexedDB`);
      return new Identity({ handle: winner.privateKey, publicKey: winner.publicKey });
    }
  } finally {
    db.close();
  }
}

/** Deletes the identity stored under `name` (the next {@link loadIdentity} makes a new one). */
export async function forgetIdentity(name = 'default', options: IdentityStoreOptions = {}): Promise<void> {
  const db = await open(factoryOf(options));
  try {
    await done(db.transaction(STORE, 'readwrite').objectStore(STORE).delete(name));
  } finally {
    db.close();
  }
}
