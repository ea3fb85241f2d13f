import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

// Browser bundles must never need `ws`, `node-datachannel` or Node's modules: only a lazy
// import with a variable specifier may reach them, and only the Node entries (signal/node,
// identity/node) may import them.
describe('browser-safe imports', () => {
  const browserModules = [
    'transport/webrtc.ts', 'transport/peer-connection.ts', 'transport/chunking.ts', 'transport/emitter.ts', 'transport/sdp-signature.ts', 'transport/index.ts',
    'signal/client.ts', 'signal/protocol.ts', 'signal/index.ts',
    'identity/bytes.ts', 'identity/ed25519.ts', 'identity/identity.ts', 'identity/peer-id.ts', 'identity/store.ts', 'identity/index.ts',
  ];
  for (const file of browserModules) {
    it(file, () => {
      const text = readFileSync(new URL(`../src/${file}`, import.meta.url), 'utf8');
      expect(text).not.toMatch(/from\s+['"](ws|node-datachannel[^'"]*|node:[^'"]+)['"]/);
      expect(text).not.toMatch(/import\(\s*['"](ws|node-datachannel[^'"]*)['"]\s*\)/);
      expect(text).not.toMatch(/from\s+['"]\.\/(server|node)\.js['"]/);
    });
  }
});
