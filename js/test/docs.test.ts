/**
 * The docs the package ships and quotes:
 * - the tutorial "Federate your own model" is the same section in js/README.md and
 *   docs/WEB.md, and its files, extracted as written, compile with tsc and train — a Node
 *   server and two clients (run in Node as pages would be, over node-datachannel) — past
 *   90 % (test/pack.test.ts runs the same files in Chromium pages built by Vite);
 * - docs/SPLIT.md's TypeScript block, run as written on the digits, installs a server and
 *   a client that train the CNN split and print held-out scores;
 * - the docs that ship in the package link only to docs that ship, and the type
 *   declarations name no other file;
 * - the size figures of README.md, js/README.md and docs/WEB.md are within 3 % of what
 *   `npm run size` measures.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';

import { afterAll, describe, expect, test } from 'vitest';

// @ts-expect-error the size script is plain JavaScript
import { measure } from '../scripts/size.mjs';
import * as pkg from '../src/index.js';
import { packageRoot, repoRoot, wasmBytes } from './support.js';
import { NODE_PAGE_SHIM, TUTORIAL_TSCONFIG, tutorialFiles, tutorialSection } from './tutorial.js';

const readme = readFileSync(join(packageRoot, 'README.md'), 'utf8');
const web = readFileSync(join(repoRoot, 'docs', 'WEB.md'), 'utf8');
const TSC = join(packageRoot, 'node_modules', 'typescript', 'bin', 'tsc');

/** The docs prepack copies into the package (scripts/prepack.mjs). */
const SHIPPED = /const SHIPPED_DOCS = \[([^\]]*)\]/.exec(readFileSync(join(packageRoot, 'scripts', 'prepack.mjs'), 'utf8'))![1]!
  .split(',')
  .map((s) => s.trim().replace(/'/g, ''));

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
}

describe('the tutorial', () => {
  const children: ChildProcess[] = [];
  let scratch: string | undefined;
  afterAll(() => {
    for (const child of children) child.kill();
    if (scratch !== undefined) rmSync(scratch, { recursive: true, force: true });
  });

  test('is one section, the same in js/README.md and docs/WEB.md', () => {
    expect(tutorialSection(web)).toBe(tutorialSection(readme));
    expect([...tutorialFiles(readme).keys()]).toEqual(['federation.ts', 'server.ts', 'client.ts']);
  });

  test('its files compile, and a Node server and two clients train past 90 % over WebRTC', async () => {
    // inside the package folder, so that `bytesandbrains` resolves to it (a self-reference)
    scratch = mkdtempSync(join(packageRoot, '.tutorial-'));
    for (const [name, code] of tutorialFiles(readme)) writeFileSync(join(scratch, name), code);
    writeFileSync(join(scratch, 'run-client.mjs'), NODE_PAGE_SHIM);
    writeFileSync(join(scratch, 'tsconfig.json'), JSON.stringify(TUTORIAL_TSCONFIG));
    const compiled = spawnSync(process.execPath, [TSC, '-p', scratch], { encoding: 'utf8' });
    expect(compiled.stdout + compiled.stderr).toBe('');

    const port = await freePort();
    const server = spawn(process.execPath, ['server.js'], { cwd: scratch, env: { ...process.env, PORT: String(port) } });
    children.push(server);
    let output = '';
    server.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    server.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => server.on('exit', resolve));
    const serverId = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the server printed no id:\n${output}`)), 30_000);
      server.stdout.on('data', () => {
        const id = /server peer id: (\w+)/.exec(output)?.[1];
        if (id !== undefined) clearTimeout(timer), resolve(id);
      });
    });
    for (let k = 0; k < 2; k++) {
      const client = spawn(process.execPath, ['run-client.mjs', `?server=${serverId}&signal=ws://127.0.0.1:${port}`], { cwd: scratch });
      client.stderr.on('data', (chunk: Buffer) => (output += `client ${k}: ${chunk.toString()}`));
      children.push(client);
    }
    const code = await Promise.race([exited, new Promise<string>((resolve) => setTimeout(() => resolve('timed out'), 90_000))]);
    expect(code, output).toBe(0);
    const trained = Number(/trained: ([\d.]+) %/.exec(output)?.[1]);
    expect(trained, output).toBeGreaterThanOrEqual(90);
  }, 150_000);
});

describe("docs/SPLIT.md's TypeScript block", () => {
  test('runs as written: the server and the client it installs train the CNN split, every step answered', async () => {
    const block = /\n## From TypeScript\n[\s\S]*?```ts\n([\s\S]*?)```/.exec(readFileSync(join(repoRoot, 'docs', 'SPLIT.md'), 'utf8'))?.[1];
    expect(block, 'no ts block under "## From TypeScript"').toBeDefined();
    // what it imports, the package exports; the rest of it is plain JavaScript
    const imported = /^import \{([^}]*)\} from 'bytesandbrains';\n/.exec(block!)!;
    const names = imported[1]!.split(',').map((n) => n.trim());
    for (const name of names) expect(pkg, `bytesandbrains exports no ${name}`).toHaveProperty(name);
    const given = ['bb', 'cnn', 'data', 'test'];
    const run = new Function(...names, ...given, `${block!.slice(imported[0].length)}\nreturn { server, client };`) as (...args: unknown[]) => { server: pkg.SplitServer; client: pkg.SplitClient };
    const bb = await pkg.loadBb(wasmBytes());
    const digits = pkg.Dataset.fromCsv(bb, gunzipSync(readFileSync('/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz')));
    const data = digits.subset(Array.from({ length: 256 }, (_, i) => i));
    const test = digits.subset(Array.from({ length: 200 }, (_, i) => 1000 + i));
    const cnn = new Uint8Array(readFileSync(join(repoRoot, 'examples', 'models', 'digits_cnn.onnx')));
    const log = console.log;
    const printed: string[] = [];
    console.log = (line: string) => printed.push(line);
    try {
      const { server, client } = run(...names.map((n) => pkg[n as keyof typeof pkg]), bb, cnn, data, test);
      const network = new pkg.LocalNetwork([server.node, client.node]);
      let now = pkg.monotonicNowNs();
      for (let ms = 0; ms < 20_000 && printed.length < 3; ms++) network.poll((now += 1_000_000n));
      expect(printed.length, 'the client printed no held-out score').toBeGreaterThanOrEqual(3);
      expect(printed.every((line) => /^held out: (0(\.\d+)?|1)$/.test(line)), printed.join(' | ')).toBe(true);
      expect(client.counts()).toMatchObject({ timeouts: 0, refused_gradients: 0 });
      expect(client.counts().steps).toBeGreaterThan(0);
      expect(server.counts().steps).toBe(client.counts().steps);
    } finally {
      console.log = log;
    }
  }, 60_000);
});

describe('the docs that ship', () => {
  test('link only to docs that ship, and the README links only into the package', () => {
    const problems: string[] = [];
    const links = (text: string): string[] => [...text.matchAll(/\]\(([^)\s#]+)(?:#[^)]*)?\)/g)].map((m) => m[1]!).filter((l) => !/^https?:/.test(l));
    for (const doc of SHIPPED) {
      for (const link of links(readFileSync(join(repoRoot, 'docs', doc), 'utf8'))) {
        if (!SHIPPED.includes(link)) problems.push(`docs/${doc} links to ${link}, which does not ship`);
      }
    }
    for (const link of links(readme)) {
      if (!(link.startsWith('docs/') && SHIPPED.includes(link.slice('docs/'.length)))) problems.push(`README.md links to ${link}, which does not ship`);
    }
    expect(problems).toEqual([]);
  });

  test('the type declarations name only docs that ship, and no repository file', () => {
    const dist = join(packageRoot, 'dist');
    const declarations = (dir: string): string[] =>
      readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? declarations(join(dir, e.name)) : e.name.endsWith('.d.ts') ? [join(dir, e.name)] : []));
    const problems: string[] = [];
    for (const file of declarations(dist)) {
      const text = readFileSync(file, 'utf8');
      for (const [ref] of text.matchAll(/\b(?:docs\/\w+\.md|include\/bb\/\w+\.h|wasm\/\w+\.[ch]|src\/\w+\/\w+\.c|js\/e2e)\b/g)) {
        if (!(ref.startsWith('docs/') && SHIPPED.includes(ref.slice('docs/'.length)))) problems.push(`${file.slice(dist.length + 1)}: ${ref}`);
      }
    }
    expect(problems).toEqual([]);
  });
});

describe('the size figures', () => {
  test('README.md, js/README.md and docs/WEB.md quote npm run size within 3 %', () => {
    expect(existsSync(join(packageRoot, 'dist'))).toBe(true);
    const { wasm, js } = measure() as { wasm: { raw: number; gzip: number }; js: { raw: number; gzip: number } };
    const figures = (text: string): number[] => [...text.matchAll(/(\d{1,3}(?:,\d{3})+) B/g)].map((m) => Number(m[1]!.replace(/,/g, '')));
    for (const [name, text] of [
      ['README.md', readFileSync(join(repoRoot, 'README.md'), 'utf8')],
      ['js/README.md', readme],
      ['docs/WEB.md', web],
    ] as const) {
      const quoted = figures(text);
      for (const [what, actual] of [['bb.wasm raw', wasm.raw], ['bb.wasm gzip', wasm.gzip], ['JavaScript raw', js.raw], ['JavaScript gzip', js.gzip]] as const) {
        const near = quoted.some((q) => Math.abs(q - actual) <= actual * 0.03);
        expect(near, `${name} quotes no figure within 3 % of ${what} ${actual} B (quoted: ${quoted.join(', ')})`).toBe(true);
      }
    }
  });
});
