// A Node worker_threads Worker of bb-mt.wasm's work pool (thread-worker-core.js does the work).
import { parentPort } from 'node:worker_threads';

import { runWorker } from './thread-worker-core.js';

parentPort.once('message', (message) => runWorker(message, (reply) => parentPort.postMessage(reply)));
