/**
 * The code blocks of the docs (docs/WEB.md, docs/GUIDE.md; the tutorial "Federate your own
 * model" is the same section in js/README.md): each block as what it is — a file, named by
 * its first line (`// federation.mjs`, `# export.py`, `<!-- index.html -->`), or shell
 * commands — so the tests run them as a reader would.
 */

export const TUTORIAL_HEADING = '## Federate your own model';

export interface DocBlock {
  /** The fence's language: js, sh, python, html, c. */
  readonly language: string;
  /** The file a block is (from its first line), or undefined for commands. */
  readonly file: string | undefined;
  readonly code: string;
}

/** The section, from its heading to the next heading of its level. */
export function tutorialSection(markdown: string): string {
  const start = markdown.indexOf(`${TUTORIAL_HEADING}\n`);
  if (start < 0) throw new Error(`no "${TUTORIAL_HEADING}" section`);
  const next = markdown.indexOf('\n## ', start + TUTORIAL_HEADING.length);
  return markdown.slice(start, next < 0 ? undefined : next + 1);
}

const FILE_LINE: Readonly<Record<string, RegExp>> = {
  js: /^\/\/ ([\w.-]+\.m?js)\n/,
  python: /^# ([\w.-]+\.py)\n/,
  html: /^<!-- ([\w.-]+\.html) -->\n/,
  c: /^\/\* ([\w.-]+\.c)\b/,
};

/** Every fenced block of `markdown` (indented ones inside lists included). */
export function docBlocks(markdown: string): DocBlock[] {
  return [...markdown.matchAll(/^( *)```(\w+)\n([\s\S]*?)^\1```$/gm)].map((match) => {
    const indent = match[1]!.length;
    const language = match[2]!;
    const code = match[3]!.split('\n').map((line) => line.slice(indent)).join('\n');
    const file = FILE_LINE[language]?.exec(code)?.[1];
    return { language, file, code };
  });
}

/** The tutorial's files by name, as the section writes them. */
export function tutorialFiles(markdown: string): Map<string, string> {
  const files = new Map<string, string>();
  for (const block of docBlocks(tutorialSection(markdown))) if (block.file !== undefined) files.set(block.file, block.code);
  return files;
}

/** The tutorial's shell blocks: the command lines, comments and blank lines left out. */
export function tutorialCommands(markdown: string): string[][] {
  return docBlocks(tutorialSection(markdown))
    .filter((block) => block.language === 'sh')
    .map((block) => block.code.split('\n').map((line) => line.replace(/#.*$/, '').trim()).filter((line) => line !== ''));
}

/**
 * Runs client.mjs in Node as a page would: the page's globals the tutorial's client reads
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
await import('./client.mjs');
`;
