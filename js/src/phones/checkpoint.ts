/**
 * A server's checkpoint file (Node): its node's state saved to a file and restored into a
 * freshly installed node after a restart, so the rounds, the registry's members, the
 * replay window and the counters carry on. The file is the saved-node record of resume.ts
 * (SHA-256 at the end, every field checked on the way back).
 *
 * ```ts
 * import { restoreCheckpoint, saveCheckpoint } from 'bytesandbrains/checkpoint';
 * const restoring = existsSync(file);
 * const server = plan.installServer(bb, { artifact, self, test, restoring });
 * let clock = monotonicNowNs;
 * if (restoring) clock = await restoreCheckpoint(file, server.node, { artifact });
 * else server.start();                                  // a restored server is running already
 * const driver = new PollDriver(server.node, { clock });
 * setInterval(() => void saveCheckpoint(file, server.node, { artifact, clock }).catch(log), 10_000);
 * ```
 */
import { readFile, rename, writeFile } from 'node:fs/promises';

import type { Clock } from '../node/driver.js';
import type { BbNode } from '../node/node.js';
import { decodeSavedNode, restoreSaved, saveNode } from './resume.js';

export interface CheckpointOptions {
  /** The artifact the node was installed from (its SHA-256 is kept and checked). */
  readonly artifact: Uint8Array;
  /** The node's clock (the PollDriver's), default monotonicNowNs. */
  readonly clock?: Clock;
}

/**
 * Writes the node's state to `path`, atomically: a temporary file beside it renamed over
 * it, so a crash mid-write leaves the previous checkpoint. A BbError while the node has
 * work (save between polls). Returns the bytes written.
 */
export async function saveCheckpoint(path: string, node: BbNode, options: CheckpointOptions): Promise<number> {
  const temporary = `${path}.${process.pid}.tmp`;
  const store = {
    get: async () => undefined,
    put: (_key: string, bytes: Uint8Array) => writeFile(temporary, bytes),
    delete: async () => {},
  };
  const bytes = await saveNode(node, { store, key: path, artifact: options.artifact, keepArtifact: false, ...(options.clock === undefined ? {} : { clock: options.clock }) });
  await rename(temporary, path);
  return bytes;
}

/**
 * Restores the checkpoint at `path` into `node`, freshly installed from the same artifact
 * for the same partitions under the same peer id, and not run (a template's server:
 * installServer with `restoring: true`, and no start(): its rounds are in the checkpoint). Returns the clock to drive it with. A BbError says what is wrong with a
 * damaged file, or which of peer, artifact or partitions differs.
 */
export async function restoreCheckpoint(path: string, node: BbNode, options: Pick<CheckpointOptions, 'artifact'>): Promise<Clock> {
  const saved = await decodeSavedNode(new Uint8Array(await readFile(path)));
  return restoreSaved(node, saved, options.artifact);
}
