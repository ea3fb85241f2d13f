/**
 * web-demo in headless Chromium: served by web-demo/serve.mjs (without its live
 * federation), the page compiles federated_digits, shows its partitions and trains a
 * server and four clients in the page until the global model passes 90 %.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';

import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, expect, test } from 'vitest';

import { CHROMIUM, CHROMIUM_ARGS, repoRoot } from './support.js';

let server: ChildProcess | undefined;
let browser: Browser | undefined;
let base = '';

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
}

beforeAll(async () => {
  if (!existsSync(join(repoRoot, 'js', 'dist', 'index.js'))) throw new Error('js/dist is missing: run `npm run build`');
  const port = await freePort();
  server = spawn(process.execPath, [join(repoRoot, 'web-demo', 'serve.mjs'), '--port', String(port), '--host', '127.0.0.1', '--no-live']);
  let output = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`serve.mjs did not start:\n${output}`)), 30_000);
    const listen = (chunk: Buffer): void => {
      output += chunk.toString();
      if (output.includes(`:${port}/`)) {
        clearTimeout(timer);
        resolve();
      }
    };
    server!.stdout!.on('data', listen);
    server!.stderr!.on('data', listen);
    server!.on('exit', (code) => reject(new Error(`serve.mjs exited (${code}):\n${output}`)));
  });
  base = `http://127.0.0.1:${port}`;
  browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  server?.kill();
});

test('the page shows the partitions and trains a federation to 90 %', async () => {
  const page = await browser!.newPage();
  const errors: string[] = [];
  page.on('pageerror', (error) => errors.push(error.message));
  await page.goto(`${base}/?run=local`);
  await page.waitForFunction('window.demo && window.demo.rounds.length > 0 && window.demo.rounds.at(-1).accuracy >= 0.9 || window.demo?.error', undefined, {
    timeout: 90_000,
  });
  const demo = (await page.evaluate('({ rounds: window.demo.rounds, error: window.demo.error })')) as {
    rounds: { round: number; accuracy: number }[];
    error?: string;
  };
  expect(demo.error).toBeUndefined();
  expect(demo.rounds.at(-1)!.accuracy).toBeGreaterThanOrEqual(0.9);
  expect(demo.rounds[0]!.accuracy).toBeLessThan(0.5);
  const partitions = await page.locator('.partition h3').allTextContents();
  expect(partitions.some((text) => text.startsWith('FedDigits_clients'))).toBe(true);
  expect(partitions.some((text) => text.startsWith('FedDigits_server'))).toBe(true);
  expect(await page.locator('#peers tbody tr').count()).toBe(5);
  expect(errors).toEqual([]);
  await page.close();
}, 120_000);
