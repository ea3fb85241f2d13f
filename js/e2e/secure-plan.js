// The federation of js/e2e/secure.mjs, as its Node server and its pages both build it
// (each hands in the package it imported: the built dist in Node, /pkg/ in a page):
// federatedAveraging with secure aggregation (SecAgg+), four clients, SecAgg+'s defaults (every
// other client holds shares, 2 rebuild a secret).
export function securePlan({ cpuMlp, federatedAveraging }) {
  return federatedAveraging({
    model: cpuMlp({ inputs: 64, hidden: [32], outputs: 10, inputScale: 1 / 16 }),
    clients: 4,
    quorum: 3,
    deadlineMs: 3000,
    roundMs: 300,
    discovery: 'seats',
    secure: {},
  });
}
