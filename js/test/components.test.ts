/**
 * Components written in TypeScript at parity with C components: a Protocol (its own
 * domain, slotless ops recorded with g.protocolCall) that talks to the same slot on
 * another peer with control-plane messages, sets timers, publishes events, counts, reads
 * its op's attributes, calls a dependency, and keeps state through snapshots; the role
 * adapters for an Aggregator and a Backend; refusals outside a callback.
 */
import { beforeAll, describe, expect, test } from 'vitest';

import {
  aggregatorComponent,
  backendComponent,
  BbNode,
  bytesValue,
  Compiler,
  loadBb,
  LocalNetwork,
  module,
  peerIdFromU64,
  peerValue,
  protocolComponent,
  registerComponentType,
  scalarOf,
  tensorValue,
  TENSOR_F32,
  trigger,
  TYPES,
  type Bb,
  type ComponentContext,
  type HostTensor,
  type Step,
} from '../src/index.js';
import { wasmBytes } from './support.js';

let bb: Bb;
beforeAll(async () => {
  bb = await loadBb(wasmBytes());
});

const MS = 1_000_000n;
const utf8 = new TextEncoder();
const text = new TextDecoder();

describe('a Protocol written in TypeScript', () => {
  test('messages, timers, events, counters, attributes, dependencies and state', () => {
    const seen: string[] = [];
    let escaped: ComponentContext | undefined;
    class Ping {
      pings = 0;
      invoke(call: Parameters<NonNullable<ReturnType<typeof protocolComponent>['invoke']>>[0]): readonly [typeof trigger] {
        const { context } = call;
        escaped = context;
        const to = call.inputs[0];
        if (to?.kind !== 'peer') throw new Error(`Ping takes a peer, got ${to?.kind}`);
        seen.push(`invoke from ${context.source ?? 'here'} as ${context.self === peerIdFromU64(1) ? 'A' : '?'}`);
        seen.push(`greeting=${String(call.attributes['greeting'])} times=${String(call.attributes['times'])}`);
        context.sendMessage(to.peer, 'ping', utf8.encode(String(call.attributes['greeting'])));
        context.setTimer(context.nowNs + 100n * MS, 42);
        const [params] = context.call('model', 'Params');
        seen.push(`model has ${params?.kind === 'tensor' ? params.tensor.data.length : 0} params`);
        context.count('ping.sent');
        return [trigger];
      }
      onMessage(message: { op: string; from: string; payload: Uint8Array }, context: ComponentContext): void {
        seen.push(`${message.op} "${text.decode(message.payload)}" from ${message.from === peerIdFromU64(1) ? 'A' : 'B'}`);
        if (message.op === 'ping') {
          this.pings++;
          context.sendMessage(message.from, 'pong', utf8.encode('hello back'));
        } else {
          context.emit('pong', bytesValue(message.payload));
        }
      }
      onTimer(token: bigint, context: ComponentContext): void {
        context.emit('timer', tensorValue('float', new Float32Array([Number(token)])));
      }
      save(): Uint8Array {
        return utf8.encode(`pings=${this.pings}`);
      }
      load(state: Uint8Array): void {
        seen.push(`loaded ${text.decode(state)}`);
      }
    }
    const instances: Ping[] = [];
    registerComponentType(bb, {
      name: 'TsPing',
      roles: ['Protocol'],
      protocolDomain: 'ping',
      create: () => {
        const ping = new Ping();
        instances.push(ping);
        return protocolComponent({
          ops: { Ping: (call) => ping.invoke(call) },
          onMessage: (m, c) => ping.onMessage(m, c),
          onTimer: (t, c) => ping.onTimer(t, c),
          save: () => ping.save(),
          load: (s) => ping.load(s),
        });
      },
    });
    const Pinger = module('Pinger', (g) => {
      const [sent] = g.protocolCall('ping', 'Ping', [g.input('peer', TYPES.peerId)], { attributes: { greeting: 'hello', times: 3 } });
      g.output('sent', sent!);
    });
    const compiler = new Compiler(bb)
      .setPermissiveTypes(true)
      .bind('ping', 'Protocol', 'TsPing')
      .bind('model', 'Model', 'CpuMlp', 'inputs=2,outputs=2')
      .declare('TsPing', undefined, [['Model', 'model']]);
    const artifact = compiler.compile(Pinger.build(bb));
    compiler.free();
    const [a, b] = [1, 2].map((i) => BbNode.install(bb, { artifact, self: peerIdFromU64(i), targets: ['Pinger'], seed: 3 })) as [BbNode, BbNode];
    a.addPeer(b.self);
    b.addPeer(a.self);
    const events: Step[] = [];
    const network = new LocalNetwork([a, b], { onStep: (_, step) => void (step.kind === 'appEvent' ? events.push(step) : step.kind === 'opFailed' && seen.push(`failed: ${step.detail}`)) });
    a.invoke('Pinger', { peer: peerValue(b.self) }, 0n);
    for (let t = 1n; t <= 30n; t++) network.poll(t * 5n * MS);
    expect(seen).toEqual([
      'invoke from here as A',
      'greeting=hello times=3',
      'model has 6 params',
      'ping "hello" from A',
      'pong "hello back" from B',
    ]);
    expect(events.map((e) => e.topic).sort()).toEqual(['pong', 'sent', 'timer']);
    expect(text.decode((events.find((e) => e.topic === 'pong')!.value as { bytes: Uint8Array }).bytes)).toBe('hello back');
    expect(scalarOf(events.find((e) => e.topic === 'timer')!.value)).toBe(42);
    expect(a.counter('ping.sent')).toBe(1n);
    expect(instances[1]!.pings).toBe(1);

    // the context is refused once its callback returned
    expect(() => escaped!.self).toThrow(/context.self after the callback returned/);

    // state: saved from B, loaded into a fresh node
    const snapshot = b.snapshot();
    const fresh = BbNode.install(bb, { artifact, self: b.self, targets: ['Pinger'], seed: 3 });
    fresh.restore(snapshot);
    expect(seen.at(-1)).toBe('loaded pings=1');
    for (const node of [a, b, fresh]) node.free();
  });
});

describe('the role adapters', () => {
  test('an Aggregator and a Backend written in TypeScript', () => {
    /** The mean of what was contributed, each time it is asked. */
    registerComponentType(bb, {
      name: 'TsMean',
      roles: ['Aggregator'],
      create: () => {
        const updates: Float32Array[] = [];
        return aggregatorComponent({
          contribute: (update) => void updates.push(update.data as Float32Array),
          aggregate: () => {
            if (updates.length === 0) return undefined;
            const mean = new Float32Array(updates[0]!.length);
            for (const u of updates) u.forEach((v, i) => (mean[i]! += v / updates.length));
            return { params: { dtype: 'float', dims: [mean.length], data: mean } };
          },
        });
      },
    });
    registerComponentType(bb, {
      name: 'TsDoubler',
      roles: ['Backend'],
      create: () =>
        backendComponent({
          ops: { Double: ([x]) => ({ dtype: 'float', dims: x!.dims, data: (x!.data as Float32Array).map((v) => 2 * v) }) as HostTensor },
        }),
    });
    const M = module('Means', (g) => {
      const x = g.input('x', TYPES.tensorF32);
      const agg = g.aggregator('mean');
      const doubled = g.backend('gpu').op('Double', [x]);
      const contributed = agg.contribute(doubled, doubled);
      g.output('mean', agg.aggregate(contributed).params);
    });
    const compiler = new Compiler(bb)
      .setPermissiveTypes(true)
      .bind('mean', 'Aggregator', 'TsMean')
      .bind('gpu', 'Backend', 'TsDoubler')
      .declareOpSet('TsDoubler', ['Double'])
      .declare('TsMean', TENSOR_F32);
    const artifact = compiler.compile(M.build(bb));
    compiler.free();
    const node = BbNode.install(bb, { artifact, targets: ['Means'] });
    const means: number[][] = [];
    node.onStep((s) => void (s.kind === 'appEvent' && s.value?.kind === 'tensor' && means.push(Array.from(s.value.tensor.data as Float32Array))));
    node.invoke('Means', { x: tensorValue('float', new Float32Array([1, 2]), [2]) }, 0n);
    node.poll(1n);
    node.invoke('Means', { x: tensorValue('float', new Float32Array([3, 4]), [2]) }, 2n);
    node.poll(3n);
    node.free();
    expect(means).toEqual([
      [2, 4],
      [4, 6],
    ]);
  });
});
