// What the benches of bench/js share in Node: where the package's build is, the inputs'
// generator, and the re-run with glibc's allocator tuned (cases.mjs: what pages share too).
import { spawnSync } from 'node:child_process';
import { createServer } from 'node:http';
import { existsSync, readFileSync } from 'node:fs';
import { extname, join, normalize, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CONTENT_TYPES } from '../../js/test/chromium.mjs';

/** The built package's entry point (js/dist). */
export const packageDist = fileURLToPath(new URL('../../js/dist/index.js', import.meta.url));
/** The module the package loads by default (js/wasm/bb.wasm). */
export const defaultWasm = fileURLToPath(new URL('../../js/wasm/bb.wasm', import.meta.url));

/**
 * The module a bench measures: `--wasm path` on the command line (e.g. js/wasm/bb-relaxed.wasm,
 * run under `node --experimental-wasm-relaxed-simd`), js/wasm/bb.wasm otherwise.
 */
export function wasmArgument() {
  const at = process.argv.indexOf('--wasm');
  return at >= 0 && process.argv[at + 1] !== undefined ? process.argv[at + 1] : defaultWasm;
}

/** The headers that make a bench page cross-origin isolated (SharedArrayBuffer, threads). */
export const ISOLATION = { 'cross-origin-opener-policy': 'same-origin', 'cross-origin-embedder-policy': 'require-corp' };

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));

/**
 * Answers a bench page's request for `path` with the repository's file there, isolated, when
 * it is one of `served` (a path, or a folder ending in '/' and everything under it) and
 * exists; with 404 otherwise.
 */
export function serveRepoFile(response, path, served) {
  const file = normalize(join(repoRoot, path));
  const relative = file.startsWith(repoRoot) ? file.slice(repoRoot.length).split(sep).join('/') : '';
  if (!served.some((prefix) => relative === prefix || (prefix.endsWith('/') && relative.startsWith(prefix))) || !existsSync(file)) {
    return void response.writeHead(404).end();
  }
  response.writeHead(200, { ...ISOLATION, 'content-type': CONTENT_TYPES[extname(file)] ?? 'application/octet-stream' }).end(readFileSync(file));
}

/**
 * A static server on 127.0.0.1, port 0, for a bench page, every answer cross-origin
 * isolated: `/` is `page` (HTML); any other path goes first to `answer(path)`, which returns
 * `{ type, body }` to answer it, null for 404, or undefined to leave it to serveRepoFile
 * over `served`. Resolves to the server's `base` address and `close()`.
 */
export async function serveIsolatedPage(page, served, answer = () => undefined) {
  const server = createServer((request, response) => {
    const path = decodeURIComponent(new URL(request.url ?? '/', 'http://localhost').pathname);
    if (path === '/') return void response.writeHead(200, { ...ISOLATION, 'content-type': 'text/html' }).end(page);
    const answered = answer(path);
    if (answered === null) return void response.writeHead(404).end();
    if (answered !== undefined) return void response.writeHead(200, { ...ISOLATION, 'content-type': answered.type }).end(answered.body);
    serveRepoFile(response, path, served);
  });
  await new Promise((done) => server.listen(0, '127.0.0.1', done));
  return { base: `http://127.0.0.1:${server.address().port}`, close: () => server.close() };
}

/** Throws, saying how to build it, when the package or `wasm` is missing. */
export function requireBuilt(wasm = defaultWasm) {
  for (const [path, how] of [
    [packageDist, 'run `npm ci && npm run build` in js/'],
    [wasm, 'run `bash scripts/build-wasm.sh` from the repository root'],
  ]) {
    if (!existsSync(path)) throw new Error(`${path} is missing: ${how}`);
  }
}

/**
 * Every run of every runtime allocates its outputs as new JavaScript arrays. glibc serves
 * allocations of 128 KiB and more with fresh mmap()ed pages and unmaps them on free, so a
 * multi-MiB output pays for page faults on every call, far more than the op itself. The
 * script calling this re-runs itself once (its own URL, the same arguments) with glibc's
 * mmap and trim thresholds raised, so freed memory is reused, and exits with the child's
 * status; all measuring happens in that one process. `--no-malloc-tuning` measures as
 * started. Returns whether this process runs with the tuning.
 */
export function rerunWithTunedMalloc(scriptUrl) {
  const tuning = { MALLOC_MMAP_THRESHOLD_: String(256 << 20), MALLOC_TRIM_THRESHOLD_: String(1 << 30) };
  const tuned = Object.entries(tuning).every(([name, value]) => process.env[name] === value);
  if (tuned || process.argv.includes('--no-malloc-tuning')) return tuned;
  const child = spawnSync(process.execPath, [...process.execArgv, fileURLToPath(scriptUrl), ...process.argv.slice(2)], {
    stdio: 'inherit',
    env: { ...process.env, ...tuning },
  });
  process.exit(child.status ?? 1);
}

/** The inputs' generator (mulberry32, js/test/random.mjs): the benches', the tests' and their pages'. */
export { randomFloats } from '../../js/test/random.mjs';
