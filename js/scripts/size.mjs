// Prints what the package weighs on the wire: bb.wasm and the JavaScript of dist/, raw
// and gzip-compressed (level 9, as a static server would precompress them). The numbers
// in README.md come from here; run `npm run build` first.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';

const packageRoot = fileURLToPath(new URL('..', import.meta.url));
const wasmPath = join(packageRoot, 'wasm', 'bb.wasm');
const distDir = join(packageRoot, 'dist');

for (const [path, hint] of [
  [wasmPath, 'bash scripts/build-wasm.sh (from the repository root)'],
  [distDir, 'npm run build'],
]) {
  if (!existsSync(path)) {
    console.error(`size: ${path} is missing: run ${hint}`);
    process.exit(1);
  }
}

const gzipped = (bytes) => gzipSync(bytes, { level: 9 }).length;
const kib = (bytes) => `${(bytes / 1024).toFixed(1)} KiB`;
const row = (name, raw, gzip) => console.log(`${name.padEnd(18)} ${String(raw).padStart(9)} B (${kib(raw).padStart(10)})   gzip ${String(gzip).padStart(8)} B (${kib(gzip).padStart(9)})`);

const wasm = readFileSync(wasmPath);
row('bb.wasm', wasm.length, gzipped(wasm));

// Each module compressed alone, as served one file per request; and all of them together.
const scripts = readdirSync(distDir)
  .filter((name) => name.endsWith('.js'))
  .sort()
  .map((name) => readFileSync(join(distDir, name)));
const joined = Buffer.concat(scripts);
row(`dist/*.js (${scripts.length})`, joined.length, scripts.reduce((sum, bytes) => sum + gzipped(bytes), 0));
row('dist/*.js joined', joined.length, gzipped(joined));
