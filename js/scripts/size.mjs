// Prints what the package weighs on the wire: bb.wasm (and bb-relaxed.wasm, which a page
// loads instead where the engine runs relaxed SIMD) and the JavaScript of dist/ (every
// module, the subpath entries included), raw and gzip-compressed (level 9, as a static
// server would precompress them). README.md, js/README.md and docs/WEB.md quote these
// figures (test/docs.test.ts holds them to it); run `npm run build` first.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { gzipSync } from 'node:zlib';

const packageRoot = fileURLToPath(new URL('..', import.meta.url));
const wasmPath = join(packageRoot, 'wasm', 'bb.wasm');
const relaxedPath = join(packageRoot, 'wasm', 'bb-relaxed.wasm');
const distDir = join(packageRoot, 'dist');

const gzipped = (bytes) => gzipSync(bytes, { level: 9 }).length;

function scriptsUnder(dir) {
  return readdirSync(dir, { withFileTypes: true })
    .sort((a, b) => a.name.localeCompare(b.name))
    .flatMap((entry) => (entry.isDirectory() ? scriptsUnder(join(dir, entry.name)) : entry.name.endsWith('.js') ? [join(dir, entry.name)] : []));
}

/** The figures: bb.wasm and dist's JavaScript, raw and gzip -9 (each module alone, and all together). */
export function measure() {
  for (const [path, hint] of [
    [wasmPath, 'bash scripts/build-wasm.sh (from the repository root)'],
    [distDir, 'npm run build'],
  ]) {
    if (!existsSync(path)) throw new Error(`size: ${path} is missing: run ${hint}`);
  }
  const wasm = readFileSync(wasmPath);
  const relaxed = existsSync(relaxedPath) ? readFileSync(relaxedPath) : undefined;
  const scripts = scriptsUnder(distDir).map((file) => readFileSync(file));
  const joined = Buffer.concat(scripts);
  return {
    wasm: { raw: wasm.length, gzip: gzipped(wasm) },
    relaxed: relaxed === undefined ? undefined : { raw: relaxed.length, gzip: gzipped(relaxed) },
    js: { modules: scripts.length, raw: joined.length, gzip: scripts.reduce((sum, bytes) => sum + gzipped(bytes), 0), gzipJoined: gzipped(joined) },
  };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  try {
    const { wasm, relaxed, js } = measure();
    const kib = (bytes) => `${(bytes / 1024).toFixed(1)} KiB`;
    const row = (name, raw, gzip) =>
      console.log(`${name.padEnd(18)} ${String(raw).padStart(9)} B (${kib(raw).padStart(10)})   gzip ${String(gzip).padStart(8)} B (${kib(gzip).padStart(9)})`);
    row('bb.wasm', wasm.raw, wasm.gzip);
    if (relaxed !== undefined) row('bb-relaxed.wasm', relaxed.raw, relaxed.gzip);
    row(`dist/**/*.js (${js.modules})`, js.raw, js.gzip);
    row('dist/**/*.js joined', js.raw, js.gzipJoined);
  } catch (error) {
    console.error(error.message);
    process.exit(1);
  }
}
