/**
 * The command line of `bytesandbrains serve`: flags (or a JSON file) in, a server running
 * until it stops, an exit code out — 0 when it finished or was stopped, 2 for a mistake in
 * what it was given (a flag, the model, the test set, the checkpoint), 1 for anything else.
 */
import { readFileSync } from 'node:fs';

import { CheckpointError } from './checkpoint.js';
import { ConfigError, parseServeArgs, USAGE } from './config.js';
import { serve, ServeError, type RunningServer } from './server.js';

export async function main(argv: readonly string[]): Promise<number> {
  let config;
  try {
    config = parseServeArgs(argv, (path) => readFileSync(path, 'utf8'));
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    console.error(`bytesandbrains serve: ${error.message}\n(bytesandbrains serve --help lists the options)`);
    return 2;
  }
  if (config === 'help') {
    console.log(USAGE);
    return 0;
  }
  let running: RunningServer;
  try {
    running = await serve(config, (line) => console.log(line));
  } catch (error) {
    const given = error instanceof ServeError || error instanceof CheckpointError;
    console.error(`bytesandbrains serve: ${(error as Error).message}`);
    return given ? 2 : 1;
  }
  const stopped = new Promise<string>((resolve) => {
    for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => resolve(`stopped by ${signal}`));
  });
  const how = await Promise.race([running.finished.then((accuracy) => `trained: ${(accuracy * 100).toFixed(1)} % after ${config.rounds} rounds`), stopped]);
  await running.stop();
  console.log(how);
  return 0;
}
