// The federation of js/e2e/phones.mjs, as its Node server and its pages both build it
// (each hands in the package it imported: the built dist in Node, /pkg/ in a page).
export function phonePlan({ cpuMlp, federatedAveraging }) {
  return federatedAveraging({
    model: cpuMlp({ inputs: 64, hidden: [32], outputs: 10, inputScale: 1 / 16 }),
    clients: 2,
    quorum: 1,
    deadlineMs: 1500,
    roundMs: 300,
    registryTtlMs: 5000,
    compress: { kind: 'topk', k: 0.3 },
  });
}
