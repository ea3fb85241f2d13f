import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The round trip spawns the native tool once per model (about a thousand of them).
    testTimeout: 120_000,
  },
});
