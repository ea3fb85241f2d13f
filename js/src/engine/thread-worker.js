// A Web Worker of bb-mt.wasm's work pool (thread-worker-core.js does the work). Its only
// import is static, so bundlers build it in any worker format (Vite's default is iife).
import { runWorker } from './thread-worker-core.js';

globalThis.addEventListener('message', (event) => runWorker(event.data, (reply) => globalThis.postMessage(reply)), { once: true });
