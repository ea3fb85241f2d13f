/**
 * The docs the package ships and quotes:
 * - the tutorial "Federate your own model" is the same section in js/README.md and
 *   docs/WEB.md, and its files, extracted as written, run: a Node server and two clients
 *   (run in Node as pages would be, over node-datachannel) past 90 %, a PyTorch export
 *   federated in one process, gossip in one process, `bytesandbrains serve` with clients
 *   that build its plan (test/pack.test.ts runs its install lines in a fresh app and its
 *   files in Chromium pages built by Vite);
 * - every other code block of docs/WEB.md and docs/GUIDE.md runs as written (the C ones:
 *   ctest -R guide_c), and none is left that no test runs;
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

import { createRequire } from 'node:module';

import { afterAll, beforeAll, describe, expect, test } from 'vitest';

// @ts-expect-error the size script is plain JavaScript
import { measure } from '../scripts/size.mjs';
import * as pkg from '../src/index.js';
import { packageRoot, repoRoot, wasmBytes } from './support.js';
import { docBlocks, NODE_PAGE_SHIM, tutorialCommands, tutorialFiles, tutorialSection } from './tutorial.js';

const ort = createRequire(import.meta.url)('onnxruntime-node') as {
  InferenceSession: { create(bytes: Uint8Array): Promise<{ run(feeds: Record<string, unknown>): Promise<Record<string, { data: Float32Array }>> }> };
  Tensor: new (type: 'float32', data: Float32Array, dims: readonly number[]) => unknown;
};
const readme = readFileSync(join(packageRoot, 'README.md'), 'utf8');
const web = readFileSync(join(repoRoot, 'docs', 'WEB.md'), 'utf8');

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
  const files = tutorialFiles(readme);
  let scratch = '';
  beforeAll(() => {
    // inside the package folder, so that `bytesandbrains` resolves to it (a self-reference)
    scratch = mkdtempSync(join(packageRoot, '.tutorial-'));
    for (const [name, code] of files) writeFileSync(join(scratch, name), code);
  });
  afterAll(() => {
    for (const child of children) child.kill('SIGKILL');
    if (scratch !== '') rmSync(scratch, { recursive: true, force: true });
  });

  /** Runs a process of the tutorial in the scratch folder; resolves with its exit code and output. */
  function start(command: string, args: string[], env: Record<string, string> = {}): { child: ChildProcess; output: () => string; exited: Promise<number | null> } {
    const child = spawn(command, args, { cwd: scratch, env: { ...process.env, ...env } });
    children.push(child);
    let output = '';
    child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    return { child, output: () => output, exited: new Promise((resolve) => child.on('exit', resolve)) };
  }
  async function waitFor(process: { output: () => string }, pattern: RegExp, ms = 30_000): Promise<RegExpExecArray> {
    for (const begin = Date.now(); Date.now() - begin < ms; await new Promise((r) => setTimeout(r, 50))) {
      const match = pattern.exec(process.output());
      if (match !== null) return match;
    }
    throw new Error(`never printed ${pattern}:\n${process.output()}`);
  }
  async function finished(process: { exited: Promise<number | null>; output: () => string }, ms = 90_000): Promise<string> {
    const code = await Promise.race([process.exited, new Promise<string>((resolve) => setTimeout(() => resolve('timed out'), ms))]);
    expect(code, process.output()).toBe(0);
    return process.output();
  }

  test('is one section, the same in js/README.md and docs/WEB.md', () => {
    expect(tutorialSection(web)).toBe(tutorialSection(readme));
    expect([...files.keys()]).toEqual(['federation.mjs', 'server.mjs', 'client.mjs', 'index.html', 'export.py', 'own-model.mjs', 'gossip.mjs', 'points-csv.mjs', 'served-client.mjs']);
  });

  test('its server and two clients (run in Node as pages would be) train past 90 % over WebRTC, as written', async () => {
    writeFileSync(join(scratch, 'run-client.mjs'), NODE_PAGE_SHIM);
    const port = await freePort();
    const server = start(process.execPath, ['server.mjs'], { PORT: String(port) });
    const serverId = (await waitFor(server, /server peer id: (\w+)/))[1]!;
    for (let k = 0; k < 2; k++) start(process.execPath, ['run-client.mjs', `?server=${serverId}&signal=ws://127.0.0.1:${port}`]);
    const output = await finished(server);
    expect(Number(/trained: ([\d.]+) %/.exec(output)?.[1]), output).toBeGreaterThanOrEqual(90);
    // no round ran before a client was there: the first one printed is the initial model's, round 0
    expect(/round (\d+):/.exec(output)?.[1]).toBe('0');
  }, 150_000);

  test('the PyTorch export federates in one process, and onnxruntime scores its export as reported', async () => {
    const exported = spawnSync('/usr/bin/python3', ['export.py'], { cwd: scratch, encoding: 'utf8' });
    expect(exported.status, exported.stderr).toBe(0);
    const output = await finished(start(process.execPath, ['own-model.mjs']));
    const accuracy = Number(/trained: ([\d.]+) % after 20 rounds/.exec(output)?.[1]);
    expect(accuracy, output).toBeGreaterThanOrEqual(90);
    // onnxruntime on the server's test points (points-csv.mjs writes them)
    const rows = spawnSync(process.execPath, ['points-csv.mjs'], { cwd: scratch, encoding: 'utf8' }).stdout.trim().split('\n').map((line) => line.split(',').map(Number));
    const session = await ort.InferenceSession.create(new Uint8Array(readFileSync(join(scratch, 'points-trained.onnx'))));
    const x = Float32Array.from(rows.flatMap((row) => row.slice(0, 2)));
    const logits = (await session.run({ x: new ort.Tensor('float32', x, [rows.length, 2]) }))['logits']!.data;
    const right = rows.filter((row, i) => (logits[2 * i + 1]! > logits[2 * i]! ? 1 : 0) === row[2]).length;
    expect((100 * right) / rows.length).toBeCloseTo(accuracy, 0);
  }, 120_000);

  test('gossip in one process: every peer past 90 %', async () => {
    const output = await finished(start(process.execPath, ['gossip.mjs']));
    const scores = [...output.matchAll(/([\d.]+) %/g)].map((m) => Number(m[1]));
    expect(scores.length, output).toBe(4);
    for (const score of scores) expect(score, output).toBeGreaterThanOrEqual(90);
  }, 60_000);

  test('npx bytesandbrains serve, as written, with the clients of served-client.mjs', async () => {
    const [csv, serve] = tutorialCommands(readme).find((lines) => lines.some((line) => line.includes('bytesandbrains serve')))!;
    // node points-csv.mjs > points.csv
    const [script, out] = /^node (\S+) > (\S+)$/.exec(csv!)!.slice(1);
    const rows = spawnSync(process.execPath, [script!], { cwd: scratch, encoding: 'utf8' });
    expect(rows.status, rows.stderr).toBe(0);
    writeFileSync(join(scratch, out!), rows.stdout);
    if (!existsSync(join(scratch, 'points.onnx'))) spawnSync('/usr/bin/python3', ['export.py'], { cwd: scratch });
    // the command as written, the package's own bin for npx's, on a free port
    const args = serve!.replace(/^npx bytesandbrains /, '').split(/\s+/);
    const server = start(process.execPath, [join(packageRoot, 'bin', 'bytesandbrains.mjs'), ...args, '--port', '0']);
    const base = (await waitFor(server, /status: (http:\/\/[\d.:]+)\/status/))[1]!;
    for (const seed of ['2', '3']) start(process.execPath, ['served-client.mjs', base, seed]);
    const output = await finished(server);
    expect(Number(/trained: ([\d.]+) % after 20 rounds/.exec(output)?.[1]), output).toBeGreaterThanOrEqual(90);
    expect(existsSync(join(scratch, 'points-global.onnx'))).toBe(true);
  }, 150_000);
});

/**
 * A block whose first line names an end-to-end page (`// js/e2e/phone.js ...`) shows that
 * page's lines; the e2e run (scripts/e2e.sh) runs them in Chromium.
 */
const E2E_EXCERPT = /^\/\/ js\/(e2e\/[\w.-]+\.js)\b/;

/** The programs of WEB.md and GUIDE.md outside the tutorial, and what each prints when it works. */
const PROGRAMS: Readonly<Record<string, RegExp>> = {
  'frames.mjs': /^trained on the stream: (100\.0|9\d\.\d) %$/m,
  'traffic.mjs': /^FederatedAveraging\.update: composite$/m,
  'train.mjs': /^loss [\d.]+, accuracy (100\.0|9\d\.\d) %, 13706 parameters$/m,
  'run-cnn.mjs': /^\[ 2, 10 \] 20$/m,
};

describe('every code block of WEB.md and GUIDE.md', () => {
  const guide = readFileSync(join(repoRoot, 'docs', 'GUIDE.md'), 'utf8');
  const blocks = [...docBlocks(web), ...docBlocks(guide)];

  test('the programs outside the tutorial run as written and print what they say', () => {
    const scratch = mkdtempSync(join(packageRoot, '.doc-programs-'));
    try {
      for (const [name, prints] of Object.entries(PROGRAMS)) {
        const block = blocks.find((b) => b.file === name);
        expect(block, `no block ${name}`).toBeDefined();
        writeFileSync(join(scratch, name), block!.code);
        const ran = spawnSync(process.execPath, [name], { cwd: scratch, encoding: 'utf8', timeout: 120_000 });
        expect(ran.status, `${name}:\n${ran.stdout}${ran.stderr}`).toBe(0);
        expect(ran.stdout, name).toMatch(prints);
      }
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
  }, 240_000);

  test("an excerpt of an end-to-end page is that page's code, line by line in its order", () => {
    const excerpts = blocks.filter((block) => E2E_EXCERPT.test(block.code));
    expect(excerpts.length).toBeGreaterThan(0);
    for (const block of excerpts) {
      const page = readFileSync(join(packageRoot, E2E_EXCERPT.exec(block.code)![1]!), 'utf8').split('\n').map((line) => line.trim());
      let at = 0;
      for (const line of block.code.split('\n').slice(1).map((l) => l.trim()).filter((l) => l !== '')) {
        const found = page.indexOf(line, at);
        expect(found, `${E2E_EXCERPT.exec(block.code)![1]} has no line, after line ${at}: ${line}`).toBeGreaterThanOrEqual(0);
        at = found + 1;
      }
    }
  });

  test('each is run by a test', () => {
    const tutorial = new Set(tutorialFiles(readme).keys());
    const unrun = blocks.filter((block) => {
      if (block.file !== undefined && (tutorial.has(block.file) || block.file in PROGRAMS)) return false; // this file
      if (block.language === 'c' && block.file !== undefined) return false; // ctest -R guide_c
      if (E2E_EXCERPT.test(block.code)) return false; // an end-to-end page's own lines (below)
      // the tutorial's install lines (test/pack.test.ts, in a fresh app) and its serve command (above)
      if (block.language === 'sh' && tutorialCommands(readme).some((lines) => block.code.includes(lines[0]!))) return false;
      return true;
    });
    expect(unrun.map((block) => `${block.language}: ${block.code.slice(0, 80)}`)).toEqual([]);
  });
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
    type Figures = { raw: number; gzip: number };
    const { wasm, relaxed, js } = measure() as { wasm: Figures; relaxed: Figures | undefined; js: Figures };
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
    // docs/WEB.md also gives bb-relaxed.wasm's
    expect(relaxed, 'wasm/bb-relaxed.wasm is built').toBeDefined();
    for (const [what, actual] of [['bb-relaxed.wasm raw', relaxed!.raw], ['bb-relaxed.wasm gzip', relaxed!.gzip]] as const) {
      const near = figures(web).some((q) => Math.abs(q - actual) <= actual * 0.03);
      expect(near, `docs/WEB.md quotes no figure within 3 % of ${what} ${actual} B`).toBe(true);
    }
  });
});
