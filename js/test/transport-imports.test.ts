import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

// Browser bundles must never need `ws` or `node-datachannel`: only a lazy import with a
// variable specifier may reach them, and only the server module may import `ws`.
describe('browser-safe imports', () => {
  const browserModules = ['transport/webrtc.ts', 'transport/chunking.ts', 'transport/emitter.ts', 'transport/index.ts', 'signal/client.ts', 'signal/protocol.ts', 'signal/index.ts'];
  for (const file of browserModules) {
    it(file, () => {
      const text = readFileSync(new URL(`../src/${file}`, import.meta.url), 'utf8');
      expect(text).not.toMatch(/from\s+['"](ws|node-datachannel[^'"]*|node:[^'"]+)['"]/);
      expect(text).not.toMatch(/import\(\s*['"](ws|node-datachannel[^'"]*)['"]\s*\)/);
      expect(text).not.toMatch(/from\s+['"]\.\/(server|node)\.js['"]/);
    });
  }
});
