import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    // The round trip spawns the native tool once per model (about a thousand of them).
    testTimeout: 120_000,
    // One file per core, two at the least: most files wait on sockets, browsers and child
    // processes (Vitest's own default leaves one core idle, on CI's two: one file at a time).
    maxWorkers: Math.max(2, availableParallelism()),
    projects: [
      {
        extends: true,
        test: { name: 'js', include: ['test/**/*.test.ts'], exclude: ['test/pack.test.ts'] },
      },
      // npm pack runs the package's prepack, which rebuilds dist/ in place while other files
      // load it: the packed package's tests run alone, after the rest.
      {
        extends: true,
        test: { name: 'pack', include: ['test/pack.test.ts'], sequence: { groupOrder: 1 } },
      },
    ],
  },
});
