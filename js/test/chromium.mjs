// How the browser tests and the page bench (bench/js/browser.mjs) run Chromium and serve it
// files: plain JavaScript, so Node scripts outside the TypeScript tests use it as well.

/** Headless Chromium: Debian's, or BB_CHROMIUM. */
export const CHROMIUM = process.env['BB_CHROMIUM'] ?? '/usr/bin/chromium';
/** What it runs with: no sandbox (root), no GPU, and none of its calls home (the network is closed). */
export const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
/** Content types the static servers send. */
export const CONTENT_TYPES = {
  '.js': 'text/javascript',
  '.mjs': 'text/javascript',
  '.wasm': 'application/wasm',
  '.html': 'text/html',
};
