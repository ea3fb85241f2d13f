/**
 * Identity files under concurrent callers. A file being written exists, empty or short,
 * from its open until its bytes land; here every write takes 20 ms between the two, so a
 * reader that can see a file half written does, every run.
 */
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';

vi.mock('node:fs/promises', async (importOriginal) => {
  const fs = await importOriginal<typeof import('node:fs/promises')>();
  const writeFile = async (path: string, data: Uint8Array, options?: { mode?: number; flag?: string }) => {
    const handle = await fs.open(path, options?.flag ?? 'w', options?.mode);
    try {
      await new Promise((resolve) => setTimeout(resolve, 20));
      await handle.writeFile(data);
    } finally {
      await handle.close();
    }
  };
  return { ...fs, default: { ...fs, writeFile }, writeFile };
});

const { Identity } = await import('../src/identity/index.js');
const { loadIdentityFile, saveIdentityFile } = await import('../src/identity/node.js');

describe('identity files with slow writes', () => {
  it('of several callers making one file at once, every one reads the identity one of them wrote', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'bb-identity-'));
    try {
      const path = join(dir, 'race.key');
      const loaded = await Promise.all(Array.from({ length: 6 }, () => loadIdentityFile(path)));
      const kept = await loadIdentityFile(path);
      for (const identity of loaded) expect(identity.peerId).toBe(kept.peerId);
      expect(statSync(path).mode & 0o777).toBe(0o600);
      expect(readdirSync(dir)).toEqual(['race.key']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('saving replaces the file whole: a reader at the same time sees one identity or the other', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'bb-identity-'));
    try {
      const path = join(dir, 'peer.key');
      const first = await loadIdentityFile(path);
      const second = await Identity.generate({ extractable: true });
      const saving = saveIdentityFile(second, path);
      await new Promise((resolve) => setTimeout(resolve, 5));
      const seen = await loadIdentityFile(path);
      await saving;
      expect([first.peerId, second.peerId]).toContain(seen.peerId);
      expect((await loadIdentityFile(path)).peerId).toBe(second.peerId);
      expect(statSync(path).mode & 0o777).toBe(0o600);
      expect(readdirSync(dir)).toEqual(['peer.key']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
