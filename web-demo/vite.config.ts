// Builds web-demo into dist/: the page, its workers, the package's four builds of the
// module as assets (bb.wasm, bb-relaxed.wasm, bb-mt.wasm, bb-mt-relaxed.wasm: the page picks one as the
// package's loader does) and the digits it learns from (scikit-learn's, which the machine's set-up
// installs), so dist/ is a static site. serve.mjs serves it with the live federation.
import { existsSync, readFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';

import { defineConfig, type Plugin } from 'vite';

const DIGITS = '/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz';

function digits(): Plugin {
  const csv = (): Buffer => {
    if (!existsSync(DIGITS)) throw new Error(`${DIGITS} is missing: install python3-sklearn (scripts/setup.sh does)`);
    return gunzipSync(readFileSync(DIGITS));
  };
  return {
    name: 'web-demo-digits',
    configureServer(server) {
      server.middlewares.use('/digits.csv', (_request, response) => {
        response.setHeader('content-type', 'text/csv');
        response.end(csv());
      });
    },
    generateBundle() {
      this.emitFile({ type: 'asset', fileName: 'digits.csv', source: csv() });
    },
  };
}

// The page is cross-origin isolated (it runs bb-mt.wasm's work pool on shared memory) under
// `vite` and `vite preview` as under serve.mjs.
const isolation = {
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Embedder-Policy': 'require-corp',
  'Cross-Origin-Resource-Policy': 'same-origin',
};

export default defineConfig({
  base: './',
  server: { headers: isolation },
  preview: { headers: isolation },
  plugins: [digits()],
  worker: { format: 'es' },
  build: { target: 'es2022', outDir: 'dist', emptyOutDir: true, chunkSizeWarningLimit: 2000 },
});
