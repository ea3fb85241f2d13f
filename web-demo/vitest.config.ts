import { defineConfig } from 'vitest/config';

// The unit tests of the page's logic and of serve.mjs's; the browser run is test/e2e.mjs.
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
  },
});
