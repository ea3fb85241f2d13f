// Runs before `npm pack` and `npm publish`: builds dist/ and refuses to pack a package
// that would not work — without dist/ or without wasm/bb.wasm (built from the repository
// root with scripts/build-wasm.sh) — then copies the docs the package's README and type
// declarations point at into docs/.
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const packageRoot = fileURLToPath(new URL('..', import.meta.url));
const repoDocs = join(packageRoot, '..', 'docs');
/** The repository's docs that ship in the package. */
const SHIPPED_DOCS = ['WEB.md', 'MODULES.md', 'COMPONENTS.md', 'AUTHORING.md', 'TRANSPORT.md', 'SECURITY.md', 'DEPLOY.md', 'WIRE.md', 'IR.md', 'LEARNING.md', 'GRAD.md', 'RUNTIME.md', 'PERFORMANCE.md', 'WEB-DEMO.md', 'PRIVACY.md', 'SPLIT.md'];

function fail(message) {
  console.error(`prepack: ${message}`);
  process.exit(1);
}

for (const file of ['bb.wasm', 'bb-relaxed.wasm', 'bb-mt.wasm', 'bb-mt-relaxed.wasm']) {
  if (!existsSync(join(packageRoot, 'wasm', file))) {
    fail(`wasm/${file} is missing: build it with \`bash scripts/build-wasm.sh\` from the repository root, then pack again`);
  }
}
const tsc = join(dirname(createRequire(import.meta.url).resolve('typescript/package.json')), 'bin', 'tsc');
const build = spawnSync(process.execPath, [tsc, '-p', join(packageRoot, 'tsconfig.json')], { stdio: 'inherit' });
if (build.status !== 0) fail('the TypeScript build failed: nothing is packed');
if (!existsSync(join(packageRoot, 'dist', 'index.js'))) fail('dist/index.js is missing after the build');
mkdirSync(join(packageRoot, 'docs'), { recursive: true });
for (const doc of SHIPPED_DOCS) {
  const from = join(repoDocs, doc);
  if (!existsSync(from)) fail(`${from} is missing: the package ships it`);
  copyFileSync(from, join(packageRoot, 'docs', doc));
}
