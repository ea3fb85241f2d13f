// The program of the live federation, as serve.mjs compiles it and every joining page
// rebuilds it (to install its client): federated averaging from the package's template
// over the digits, with registry discovery — each client announces itself to the server
// and keeps its registration alive, and every round goes to the clients registered then,
// so visitors join and leave while the rounds go on.
import { cpuMlp, federatedAveraging } from 'bytesandbrains';

/** The Module's name: its partitions are LiveDigits, LiveDigits_clients and LiveDigits_server. */
export const LIVE_MODULE = 'LiveDigits';

/**
 * @typedef {object} LivePlanOptions
 * @property {number} clients client seats: a round closes at once with an update from each
 * @property {number} quorum updates that close a round once its deadline passed
 * @property {number} deadlineMs how long a round waits for every seat
 * @property {number} registryTtlMs how long a client that stopped sending heartbeats stays registered
 * @property {import('bytesandbrains').DpOptions} [dp] differential privacy (DP-FedAvg), the
 *   same on the server and every joining page: it is part of the artifact
 * @property {import('bytesandbrains').SecureOptions} [secure] secure aggregation (SecAgg+): the
 *   server sees only each round's sum; part of the artifact too, and its clients need a signer
 */

/** @param {LivePlanOptions} options */
export function livePlan({ clients, quorum, deadlineMs, registryTtlMs, dp, secure }) {
  return federatedAveraging({
    name: LIVE_MODULE,
    // federated_digits' model: 64 pixels → 32 (ReLU) → 10 digits
    model: cpuMlp({ inputs: 64, hidden: [32], outputs: 10, activation: 'relu', lr: 0.05, momentum: 0.9, inputScale: 0.0625 }),
    clients,
    quorum,
    deadlineMs,
    discovery: 'registry',
    registryTtlMs,
    roundMs: 200,
    fitSteps: 12,
    batch: 32,
    ...(dp === undefined ? {} : { dp }),
    ...(secure === undefined ? {} : { secure }),
  });
}
