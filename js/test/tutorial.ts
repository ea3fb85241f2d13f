/**
 * The tutorial "Federate your own model" (js/README.md and docs/WEB.md carry the same
 * section): its text, and its code blocks as the files they are (a block's first line
 * names it: `// federation.ts`).
 */

export const TUTORIAL_HEADING = '## Federate your own model';

/** Blocks the tests do not run yet, and why. */
export const SKIPPED_BLOCKS: Readonly<Record<string, string>> = {
  'cnn.ts': 'needs the OnnxModel component',
};

/** The section, from its heading to the next heading of its level. */
export function tutorialSection(markdown: string): string {
  const start = markdown.indexOf(`${TUTORIAL_HEADING}\n`);
  if (start < 0) throw new Error(`no "${TUTORIAL_HEADING}" section`);
  const next = markdown.indexOf('\n## ', start + TUTORIAL_HEADING.length);
  return markdown.slice(start, next < 0 ? undefined : next + 1);
}

/** The section's TypeScript blocks by file name, the skipped ones left out. */
export function tutorialFiles(markdown: string): Map<string, string> {
  const files = new Map<string, string>();
  for (const match of tutorialSection(markdown).matchAll(/```ts\n([\s\S]*?)```/g)) {
    const code = match[1]!;
    const name = /^\/\/ ([\w.-]+\.ts)\b/.exec(code)?.[1];
    if (name === undefined) throw new Error(`a tutorial block does not start with its file name: ${code.slice(0, 60)}`);
    if (name in SKIPPED_BLOCKS) continue;
    files.set(name, code);
  }
  return files;
}

/**
 * Runs client.js in Node as a page would: the page's globals the tutorial's client reads
 * (a hidden document, so the PollDriver ticks on timers; an IndexedDB held in memory, with
 * the part of its API loadIdentity uses: one database of object stores, get, add and delete,
 * add refusing a key that is there).
 */
export const NODE_PAGE_SHIM = `
const stores = new Map();
const request = (run) => {
  const r = { result: undefined, error: null, onsuccess: null, onerror: null, onupgradeneeded: null };
  setTimeout(() => {
    try { r.result = run(r); } catch (error) { r.error = error; r.onerror?.(); return; }
    r.onsuccess?.();
  });
  return r;
};
const db = {
  createObjectStore: (name) => void stores.set(name, new Map()),
  transaction: (name) => ({
    objectStore: () => ({
      get: (key) => request(() => stores.get(name).get(key)),
      add: (value, key) => request(() => {
        if (stores.get(name).has(key)) throw new Error('ConstraintError: the key is there');
        stores.get(name).set(key, value);
      }),
      delete: (key) => request(() => void stores.get(name).delete(key)),
    }),
  }),
  close() {},
};
globalThis.indexedDB = {
  open: () => request((r) => {
    if (stores.size === 0) (r.result = db), r.onupgradeneeded?.();
    return db;
  }),
};
globalThis.location = { search: process.argv[2] ?? '' };
globalThis.document = { body: { textContent: '' }, visibilityState: 'hidden', addEventListener() {}, removeEventListener() {} };
await import('./client.js');
`;

/** What the tutorial's files compile with: strict, for Node and the page alike. */
export const TUTORIAL_TSCONFIG = {
  compilerOptions: {
    strict: true,
    skipLibCheck: true,
    target: 'es2022',
    module: 'nodenext',
    moduleResolution: 'nodenext',
    lib: ['es2022', 'dom'],
    types: ['node'],
  },
  files: ['federation.ts', 'server.ts', 'client.ts'],
};
