// Runs Vitest with its usual report on the terminal and a JSON report on the side, then
// closes with one plain line, `vitest: N passed, M failed`, which CI reads (Vitest's own
// summary is not a line it recognises). Arguments are passed on to Vitest, which is the
// one installed for the package in the current directory (web-demo runs its tests so too).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';

const require = createRequire(join(process.cwd(), 'package.json'));
const vitest = join(dirname(require.resolve('vitest/package.json')), 'vitest.mjs');
const scratch = mkdtempSync(join(tmpdir(), 'bb-vitest-'));
const reportPath = join(scratch, 'report.json');

try {
  const run = spawnSync(
    process.execPath,
    [vitest, 'run', '--reporter=default', '--reporter=json', `--outputFile.json=${reportPath}`, ...process.argv.slice(2)],
    { stdio: 'inherit' },
  );
  let passed = 0;
  let failed = 0;
  try {
    const report = JSON.parse(readFileSync(reportPath, 'utf8'));
    passed = report.numPassedTests;
    failed = report.numFailedTests;
    // Each failure is named on a line of its own (`vitest: FAIL file > test`), which
    // scripts/test.sh lists under its summary. A test file that fails to load runs no
    // test, yet must count as a failure.
    for (const file of report.testResults) {
      const where = relative(process.cwd(), file.name);
      const failures = file.assertionResults.filter((test) => test.status === 'failed');
      for (const test of failures) console.log(`vitest: FAIL ${where} > ${test.fullName}`);
      if (file.status === 'failed' && failures.length === 0) {
        failed++;
        console.log(`vitest: FAIL ${where} (no test ran: ${String(file.message ?? '').split('\n')[0]})`);
      }
    }
  } catch (error) {
    console.error(`run-vitest: no JSON report from Vitest (${error.message})`);
    failed = Math.max(failed, 1);
  }
  if (run.status !== 0 && failed === 0) failed = 1; // Vitest failed for a reason the report does not count
  console.log(`vitest: ${passed} passed, ${failed} failed`);
  process.exitCode = failed > 0 ? 1 : 0;
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
