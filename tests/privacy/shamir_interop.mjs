// Shares of the library's Shamir sharing (bb_shamir_split/combine, through shamir_tool)
// against the audited npm package shamir-secret-sharing, both ways: the package combines
// what the library splits, and the library combines what the package splits, for secrets
// of 1 to 64 bytes, thresholds from 2 to all shares, and up to 255 shares.
// usage: node shamir_interop.mjs SHAMIR_TOOL
import { execFileSync } from 'node:child_process';
import { randomBytes, randomInt } from 'node:crypto';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const pkg = join(root, 'js', 'node_modules', 'shamir-secret-sharing', 'esm', 'index.js');
const { split, combine } = await import(pathToFileURL(pkg).href);
const tool = process.argv[2];

const hex = (b) => Buffer.from(b).toString('hex');
const run = (...args) => execFileSync(tool, args, { encoding: 'utf8' }).trim();

// a random subset of k of the shares
const pick = (shares, k) => {
  const copy = [...shares];
  for (let i = copy.length - 1; i > 0; i--) {
    const j = randomInt(i + 1);
    [copy[i], copy[j]] = [copy[j], copy[i]];
  }
  return copy.slice(0, k);
};

let passed = 0;
let failed = 0;
const check = (ok, what) => {
  if (ok) passed++;
  else {
    failed++;
    console.error(`FAIL ${what}`);
  }
};

const cases = [
  [1, 2, 2],
  [32, 3, 2],
  [32, 9, 5],
  [33, 40, 21],
  [64, 10, 10],
  [16, 255, 128],
  [5, 255, 2],
];
for (const [len, n, t] of cases) {
  const secret = new Uint8Array(randomBytes(len));
  // the library splits, the package combines a threshold of them (and all of them)
  const ours = run('split', hex(secret), String(n), String(t)).split('\n').map((h) => new Uint8Array(Buffer.from(h, 'hex')));
  check(ours.length === n && ours.every((s) => s.length === len + 1), `library split ${len}/${n}/${t} layout`);
  check(hex(await combine(pick(ours, t))) === hex(secret), `package combines the library's ${t} of ${n}`);
  check(hex(await combine(ours)) === hex(secret), `package combines all ${n} of the library's`);
  // the package splits (random x coordinates), the library combines
  const theirs = await split(secret, n, t);
  check(run('combine', ...pick(theirs, t).map(hex)) === hex(secret), `library combines the package's ${t} of ${n}`);
  // one share short of the threshold gives something else
  if (t > 2) check(run('combine', ...pick(theirs, t - 1).map(hex)) !== hex(secret), `library with ${t - 1} of ${t}`);
}
// the library at the package's random x coordinates
const secret = new Uint8Array(randomBytes(32));
const xs = Uint8Array.from([17, 250, 3, 99, 128]);
const atXs = run('split', hex(secret), '5', '3', hex(xs)).split('\n').map((h) => new Uint8Array(Buffer.from(h, 'hex')));
check(atXs.every((s, i) => s[32] === xs[i]), 'the library puts x last, as given');
check(hex(await combine(atXs.slice(2))) === hex(secret), 'package combines shares at chosen x');

console.log(`shamir interop: ${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
