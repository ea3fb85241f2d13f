/**
 * The package's entry points (package.json `exports`): each one resolves to a built file,
 * as a program importing the package by name reaches it, and the root holds what an app
 * needs while the worked examples and the byte-level readers stay behind their subpaths.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';

import * as examples from '../src/examples/index.js';
import * as root from '../src/index.js';
import * as internals from '../src/internals.js';
import { packageRoot } from './support.js';

type Target = string | { readonly types?: string; readonly default?: string; readonly node?: string };
const manifest = JSON.parse(readFileSync(join(packageRoot, 'package.json'), 'utf8')) as { exports: Record<string, Target> };

describe('package.json exports', () => {
  for (const [subpath, target] of Object.entries(manifest.exports)) {
    if (subpath.includes('*')) continue;
    test(`${subpath} points at files the build and the package hold`, () => {
      const files = typeof target === 'string' ? [target] : Object.values(target);
      for (const file of files) expect(existsSync(join(packageRoot, file!)), `${subpath} -> ${file}`).toBe(true);
    });
  }

  test('bytesandbrains/examples and bytesandbrains/internals are entry points', () => {
    expect(Object.keys(manifest.exports)).toEqual(expect.arrayContaining(['.', './examples', './internals', './checkpoint', './identity', './identity/node', './signal', './signal/server', './transport']));
  });
});

describe('the root export', () => {
  test('holds what an app needs', () => {
    for (const name of ['loadBb', 'OnnxModel', 'Tensor', 'CpuSession', 'BbError', 'BbNode', 'Compiler', 'LocalNetwork', 'PollDriver', 'connectPeer', 'runPeer',
      'OnnxTrainer', 'Dataset', 'module', 'federatedAveraging', 'gossipLearning', 'splitLearning', 'keepNode', 'resumeNode', 'ParticipationPolicy', 'Identity', 'loadIdentity']) {
      expect(root, name).toHaveProperty(name);
    }
  });

  test('leaves the worked examples and the byte-level readers to their subpaths', () => {
    const rootNames = new Set(Object.keys(root));
    // roundReporter belongs to the templates; the examples re-export it for their users
    const shared = [...Object.keys(examples), ...Object.keys(internals)].filter((name) => rootNames.has(name));
    expect(shared).toEqual(['roundReporter']);
    expect(Object.keys(examples)).toEqual(expect.arrayContaining(['splitDigits', 'loadDigitsCnn', 'compileFederatedDigits', 'installDigitsServer', 'federatedDigits']));
    expect(Object.keys(internals)).toEqual(expect.arrayContaining(['decodeEnvelope', 'inspectArtifact', 'encodeValue', 'BB_WASM_ABI_VERSION']));
  });
});
