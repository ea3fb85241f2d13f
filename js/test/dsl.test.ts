/**
 * The DSL in TypeScript (js/src/dsl): Modules recorded from TypeScript through bb.wasm's
 * recorder are byte for byte the Modules the C examples record, compile with the page's
 * compiler to the same artifacts, and describe themselves as `bb inspect --json` does;
 * sub-modules, bootstraps, constants, every attribute type and every syscall cross; Backend
 * ops are checked against the op set of the bound backend; and every refusal of the
 * recorder reaches TypeScript as a BbError with the recorder's message.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { beforeAll, describe, expect, test } from 'vitest';

import {
  attributeOfType,
  BbErrorCode,
  Compiler,
  float,
  floats,
  loadBb,
  module,
  OMITTED,
  TYPES,
  type Bb,
  type Graph,
  type GraphValue,
  type Module,
} from '../src/index.js';
import { bbErrorOf, nativeBbPath, onnxFunctions, wasmBytes } from './support.js';

let bb: Bb;
beforeAll(async () => {
  bb = await loadBb(wasmBytes());
});

/** federated_digits' Module (src/programs/federated_digits.c), written in TypeScript. */
const FedDigits = module('FedDigits', (g) => {
  const clients = g.input('clients', TYPES.peerIds);
  const server = g.input('server', TYPES.peerIds);
  const testX = g.input('test_x', TYPES.tensorF32);
  const testY = g.input('test_y', TYPES.tensorF32);
  const model = g.model('model');
  const aggregator = g.aggregator('aggregator');
  // the server's round loop
  const tick = g.interval(200_000_000);
  const { params: global, metadata: round } = aggregator.aggregate(tick);
  const loaded = model.loadParameters(global);
  g.output('accuracy', model.evaluate(testX, testY, loaded));
  g.output('round', round);
  g.output('model', global);
  g.netOut('global', clients, g.bundle(global, round));
  // a client's round
  const [params, roundIn] = g.unbundle(g.lookupOutput('global'), [TYPES.tensorF32, TYPES.abstract]) as [GraphValue, GraphValue];
  const { trained, samples } = model.fit(params);
  g.netOut('update', server, g.bundle(trained, samples, roundIn));
  // the server takes it in
  const received = g.lookupOutput('update');
  aggregator.contribute(received, received);
});

/** gossip_digits' Module (src/programs/gossip_digits.c). */
const GossipDigits = module('GossipDigits', (g) => {
  const testX = g.input('test_x', TYPES.tensorF32);
  const testY = g.input('test_y', TYPES.tensorF32);
  const model = g.model('model');
  const tick = g.interval(100_000_000);
  const params = model.params(tick);
  const accuracy = model.evaluate(testX, testY, params);
  g.output('accuracy', accuracy);
  const { trained } = model.fit(params, accuracy);
  const peer = g.peerSelector('view').sample(1, tick);
  g.netOut('share', peer, trained);
  const received = g.lookupOutput('share');
  g.aggregator('aggregator').contribute(received, received);
});

/** split_cnn's Modules (src/programs/split_cnn.c): SplitCnn, SplitCnnU and SplitFedCnn. */
const CUT = '/MaxPool_1_output_0';
const HEAD_CUT = '/Relu_2_output_0';
function splitCnn(name: string, shape: 'vanilla' | 'u', averaged: boolean): Module {
  return module(name, (g) => {
    const server = g.input('server', TYPES.peerIds);
    const x = g.input('test_x', TYPES.tensorF32);
    const y = g.input('test_y', TYPES.tensorF32);
    const tick = g.interval(1_000_000);
    const evalTick = g.interval(1_000_000_000);
    const clients = averaged ? g.input('clients', TYPES.peerIds) : undefined;
    g.split({
      shape,
      cuts: shape === 'u' ? [CUT, HEAD_CUT] : [CUT],
      clientModel: g.model('client_model'),
      serverModel: g.model('server_model'),
      server,
      tick,
      heldOut: { x, y, tick: evalTick },
      ...(clients === undefined ? {} : { averaging: { averager: g.aggregator('averager'), clients } }),
    });
  });
}

function compileWith(example: string, bytes: Uint8Array, moduleIndex = 0): Uint8Array {
  const compiler = Compiler.forExample(bb, example, moduleIndex);
  try {
    return compiler.compile(bytes);
  } finally {
    compiler.free();
  }
}

describe('the examples written in TypeScript', () => {
  for (const [example, recorded] of [
    ['federated_digits', FedDigits],
    ['gossip_digits', GossipDigits],
  ] as const) {
    test(`${example}: the same ModelProto bytes and the same artifact as the C recording`, () => {
      const fromTs = recorded.build(bb);
      const fromC = Compiler.recordExample(bb, example);
      expect(Buffer.from(fromTs).equals(Buffer.from(fromC))).toBe(true);
      expect(Buffer.from(compileWith(example, fromTs)).equals(Buffer.from(compileWith(example, fromC)))).toBe(true);
    });
  }

  for (const [index, recorded] of [splitCnn('SplitCnn', 'vanilla', false), splitCnn('SplitCnnU', 'u', false), splitCnn('SplitFedCnn', 'vanilla', true)].entries()) {
    test(`split_cnn's ${recorded.name}: the same ModelProto bytes and the same artifact as the C recording`, () => {
      const fromTs = recorded.build(bb);
      const fromC = Compiler.recordExample(bb, 'split_cnn', index);
      expect(Buffer.from(fromTs).equals(Buffer.from(fromC))).toBe(true);
      expect(Buffer.from(compileWith('split_cnn', fromTs, index)).equals(Buffer.from(compileWith('split_cnn', fromC, index)))).toBe(true);
    });
  }

  test('describe() of an artifact compiled in the page is what `bb inspect --json` prints', () => {
    const artifact = compileWith('federated_digits', FedDigits.build(bb));
    const scratch = mkdtempSync(join(tmpdir(), 'bb-dsl-'));
    try {
      const path = join(scratch, 'artifact.onnx');
      writeFileSync(path, artifact);
      const native = JSON.parse(execFileSync(nativeBbPath(), ['inspect', path, '--json'], { encoding: 'utf8' })) as unknown;
      expect(Compiler.describe(bb, artifact, 'json')).toEqual(native);
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
  });
});

describe('what a Module can record', () => {
  const Leaf = module(
    'Leaf',
    (g) => {
      g.output('b', g.passThrough(g.input('a')));
    },
    { bootstrap: (g) => void g.output('ready', g.pulse()) },
  );

  const functionsOf = onnxFunctions;

  test('sub-modules, a composed bootstrap, constants, the address book and every attribute type', () => {
    const Root = module(
      'Root',
      (g) => {
        const x = g.input('x', TYPES.tensorF32);
        expect(x.name).toBe('x');
        expect(x.type).toBe(TYPES.tensorF32);
        const b = g.call(Leaf, { a: x }).output('b');
        expect(b.type).toBe(TYPES.tensorF32); // the type the caller bound
        const y = g.backend('compute').op('Clip', [b, OMITTED], {
          i: -3,
          f: 0.5,
          one: float(1),
          s: 'text',
          is: [1, 2],
          fs: floats([2.5, 3]),
          ss: ['p', 'q'],
          t: { dtype: 'int64', dims: [2], data: new BigInt64Array([4n, 5n]) },
        });
        g.output('y', y);
      },
      {
        submodules: [Leaf],
        bootstrap: (g) => {
          const server = g.constant({ dtype: 'int64', dims: [1], data: new BigInt64Array([100n]) }, { type: TYPES.peerId, label: 'server_peer' });
          g.announce(server);
          g.addressBook.insertMany(server, g.addressBook.lookup(server));
          g.output('ready', g.callBootstrap(Leaf).output('ready'));
        },
      },
    );
    // attributes Clip's schema does not have: parsed by ONNX, not checked against the schema
    const functions = functionsOf(Root.build(bb), false);
    expect(Object.keys(functions)).toEqual(['Root', 'Leaf', 'Root__bootstrap', 'Leaf__bootstrap']);
    const clip = functions['Root']![1]!;
    expect(clip.op_type).toBe('Clip');
    expect(clip.input).toEqual(['v1', '']); // names count across a build: v0 is Leaf's, v1 the call's output b
    expect(clip.attribute).toEqual(['i', 'f', 'one', 's', 'is', 'fs', 'ss', 't']);
    expect(functions['Root__bootstrap']!.map((n) => n.op_type)).toEqual(['Constant', 'Announce', 'Lookup', 'InsertMany', 'Leaf__bootstrap', 'PassThrough']);
  });

  test('every syscall of the runtime records through its method', () => {
    const Sys = module('Sys', (g) => {
      const go = g.input('go', TYPES.trigger);
      const raw = g.input('raw');
      const tick = g.interval(1000);
      const [a, b] = g.tee(go, 2) as [GraphValue, GraphValue];
      g.gate(a, b);
      g.any([a, tick], 'first');
      g.onTrigger(a);
      g.pulse(go);
      g.eventSource(go);
      g.lifecyclePhase(go);
      g.gateDispatch(go, tick);
      const now = g.clock(tick);
      g.random(tick);
      const slept = g.sleep(5, tick);
      g.delay(5, slept);
      const uploads = g.limit('uploads', 2);
      uploads.release(uploads.acquire(go));
      const q = g.queue('q');
      const item = q.dequeue(q.enqueue(raw));
      const hold = g.hold('h');
      hold.stash(item);
      g.record('history', hold.flush(go));
      g.appEmit('time', now);
      g.appNotify('woke', slept);
      g.incrMetric('ticks', { delta: 2, after: [tick] });
      g.correlateTag(go);
      g.bootstrapOutput(g.bootstrapDispatch(go));
      g.protocolCall('chat', 'Say', [go], { attributes: { greeting: 'hi' }, outputs: 2 });
      g.output('now', now);
    });
    const ops = functionsOf(Sys.build(bb))['Sys']!.map((n) => n.op_type);
    for (const op of ['Interval', 'Tee', 'Gate', 'Any', 'OnTrigger', 'Pulse', 'EventSource', 'LifecyclePhase', 'GateDispatch', 'Clock', 'RngU64', 'Sleep', 'After', 'Limit.Acquire', 'Limit.Release', 'Serialize.Enqueue', 'Serialize.Dequeue', 'Hold.Stash', 'Hold.Flush', 'Record', 'AppEmit', 'AppNotify', 'IncrMetric', 'CorrelateTag', 'BootstrapDispatch', 'BootstrapOutput', 'Say']) {
      expect(ops, op).toContain(op);
    }
  });

  test('Backend ops are checked against the op set of the bound backend, declared ones too', () => {
    const Frob = module('Frob', (g) => void g.output('y', g.backend('compute').op('Frobnicate', [g.input('x', TYPES.tensorF32)])));
    const bytes = Frob.build(bb);
    const cpu = new Compiler(bb).bind('compute', 'Backend', 'CpuBackend');
    try {
      const error = bbErrorOf(() => cpu.compile(bytes));
      expect(error.message).toMatch(/UnknownOp.*Frobnicate/);
    } finally {
      cpu.free();
    }
    const host = new Compiler(bb).bind('compute', 'Backend', 'MyGpu').declareOpSet('MyGpu', ['Frobnicate', ['ai.onnx', 'Relu']]);
    try {
      expect(host.compile(bytes).length).toBeGreaterThan(0);
      host.declareOpSet('MyGpu', ['Relu']);
      expect(bbErrorOf(() => host.compile(bytes)).message).toMatch(/UnknownOp/);
    } finally {
      host.free();
    }
  });
});


describe('every refusal of the recorder reaches TypeScript with its message', () => {
  const Leaf = module('Leaf', (g) => void g.output('b', g.passThrough(g.input('a'))));
  const Empty = module('Empty', () => {});
  const Typed = module('TypedLeaf', (g) => void g.output('p', g.passThrough(g.input('peer', TYPES.peerId))));
  const x = (g: Graph): GraphValue => g.input('x', TYPES.peerId);
  let captured: Graph | undefined;
  let kept: GraphValue | undefined;
  const Capture = module('Capture', (g) => {
    captured = g;
    g.output('y', g.passThrough(kept!));
  });
  const SelfCaller: Module = module('SelfCaller', (g) => void g.call(SelfCaller, {}), { submodules: [] });
  (SelfCaller.submodules as Module[]).push(SelfCaller);
  const OtherLeaf = module('Leaf', (g) => void g.output('b', g.passThrough(g.input('a'))));

  const CASES: [string, (g: Graph) => void, number, string][] = [
    ['a value of the parent in a sub-module', (g) => { kept = x(g); g.call(Capture, {}); }, BbErrorCode.InvalidArgument, "module 'Capture': input 0 of PassThrough is value 'x' of module 'T', which this function cannot see; pass it in through an input binding"],
    ['an empty value', (g) => void g.output('y', g.lookupOutput('nope')), BbErrorCode.NotFound, "module 'T': no output port 'nope' has been declared in this function"],
    ['OMITTED outside a Backend op', (g) => void g.model('model').forward(OMITTED), BbErrorCode.InvalidArgument, 'input 0 of Forward is BB_VALUE_OMITTED, which only Backend op inputs accept'],
    ['an output port twice', (g) => { g.output('y', x(g)); g.output('y', x(g)); }, BbErrorCode.Exists, "module 'T': output port 'y' is declared twice"],
    ['a network port twice', (g) => { g.netOut('p', x(g), x(g)); g.netOut('p', x(g), x(g)); }, BbErrorCode.Exists, "network port 'p' is declared twice"],
    ['a port named like an input', (g) => void g.output('x', x(g)), BbErrorCode.Exists, "output port 'x' clashes with a value"],
    ['an input retyped', (g) => { x(g); g.input('x', TYPES.trigger); }, BbErrorCode.Type, "input 'x' declared again as bb.trigger; it was declared bb.peer_id"],
    ['an unknown method', (g) => void g.roleCall('Model', 'model', 'Foward', [x(g)]), BbErrorCode.NotFound, "Model slot 'model' has no method 'Foward' (its methods: Forward, Backward, ComputeLoss, ApplyDelta, LoadParameters, Params, Fit, Evaluate, Export, SplitForward, SplitRelay, SplitLoss, SplitBackward, SplitShare)"],
    ['a Protocol slot method', (g) => void g.roleCall('Protocol', 'registry', 'Announce', []), BbErrorCode.NotFound, "Protocol slot 'registry' has no method 'Announce'"],
    ['a wrong arity', (g) => void g.roleCall('Model', 'model', 'Forward', [x(g), x(g)]), BbErrorCode.InvalidArgument, "Model.Forward (slot 'model') takes 1 inputs and gives 1 outputs; called with 2 and 1"],
    ['a missing INT attribute', (g) => void g.roleCall('Index', 'index', 'Search', [x(g)]), BbErrorCode.InvalidArgument, "Index.Search (slot 'index') needs the INT attribute 'k'"],
    ['a stray attribute', (g) => void g.roleCall('Model', 'model', 'Forward', [x(g)], { attributes: { k: 3 } }), BbErrorCode.InvalidArgument, "Model.Forward (slot 'model') takes no attributes; got attribute 'k'"],
    ['a Backend op with no output', (g) => void g.backend('compute').opWithOutputs('Relu', [x(g)], 0), BbErrorCode.InvalidArgument, "Backend slot 'compute': an op needs at least one output"],
    ['a GRAPH attribute', (g) => void g.backend('compute').op('If', [x(g)], { body: attributeOfType(5) }), BbErrorCode.Unsupported, "attribute 'body' of If has type GRAPH; the recorder takes INT, FLOAT, STRING, INTS, FLOATS, STRINGS and TENSOR"],
    ['one slot, two roles', (g) => { g.model('model').forward(x(g)); g.index('model').add(x(g)); }, BbErrorCode.Exists, "slot 'model' has role Model; it cannot also have role Index"],
    ['a peer class off a PeerSelector', (g) => void g.roleCall('Model', 'classy', 'Params', [], { peerClass: 'clients' }), BbErrorCode.InvalidArgument, "Model slot 'classy' has a peer_class; only PeerSelector slots have one"],
    ['a bad slot name', (g) => void g.model('1model').params(), BbErrorCode.InvalidArgument, "Model slot name '1model' is not a C identifier"],
    ['a bad peer class', (g) => void g.peerSelector('sampler', 'no class').sample(1), BbErrorCode.InvalidArgument, "PeerSelector slot 'sampler' has peer class 'no class'"],
    ['a minted name', (g) => void g.input('v3'), BbErrorCode.InvalidArgument, "module 'T': input name 'v3' is not allowed"],
    ['a reserved port name', (g) => void g.output('y__recv_0', x(g)), BbErrorCode.InvalidArgument, "output port name 'y__recv_0' is not allowed"],
    ['a spaced port name', (g) => void g.netOut('my port', x(g), x(g)), BbErrorCode.InvalidArgument, "network port name 'my port' is not allowed"],
    ['a bad type', (g) => void g.input('x', 'bb.peer_id,bb.trigger'), BbErrorCode.InvalidArgument, "type 'bb.peer_id,bb.trigger' is not a denotation"],
    ['a call of a module not listed', (g) => void g.call(OtherLeaf, { a: x(g) }), BbErrorCode.NotFound, "module 'T': calls module 'Leaf', which is not one of its submodules"],
    ['an unbound input', (g) => void g.call(Leaf, {}), BbErrorCode.NotFound, "module 'Leaf': input 'a' is not bound by the call"],
    ['an unknown binding', (g) => void g.call(Leaf, { a: x(g), zzz: x(g) }), BbErrorCode.NotFound, "module 'T': module 'Leaf' has no input 'zzz'"],
    ['a binding of the wrong type', (g) => void g.call(Typed, { peer: g.input('t', TYPES.tensorF32) }), BbErrorCode.Type, "module 'TypedLeaf': input 'peer' is declared bb.peer_id, but the call binds 't' of type ai.bytesandbrains.tensor.f32"],
    ['recursion', (g) => void g.call(SelfCaller, {}), BbErrorCode.InvalidArgument, "module 'SelfCaller': calls 'SelfCaller', which is already being recorded: modules cannot recurse"],
    ['an empty sub-module', (g) => void g.call(Empty, {}), BbErrorCode.InvalidArgument, "module 'Empty' recorded nothing: its body made no nodes"],
    ['nothing recorded', () => {}, BbErrorCode.InvalidArgument, "module 'T' recorded nothing: its body made no nodes"],
    ['an unknown call port', (g) => void g.call(Leaf, { a: x(g) }).output('nope'), BbErrorCode.NotFound, "module 'Leaf' has no output port 'nope'"],
    ['a bootstrap call in a body', (g) => void g.callBootstrap(Leaf, {}), BbErrorCode.InvalidArgument, "composes the bootstrap of module 'Leaf' outside a bootstrap callback"],
    ['peers of the wrong type', (g) => void g.netOut('p', g.input('t', TYPES.tensorF32), x(g)), BbErrorCode.Type, "the peers of network port 'p' are value 't' of type ai.bytesandbrains.tensor.f32; expected bb.peer_id, bb.peer_id_vec or an untyped input"],
    ['a list as one peer', (g) => void g.announce(g.input('servers', TYPES.peerIds)), BbErrorCode.Type, "the peer of Announce is value 'servers' of type bb.peer_id_vec"],
    ['an empty bundle', (g) => void g.bundle(), BbErrorCode.InvalidArgument, 'bundle needs at least one part'],
    ['an unbundled tensor', (g) => void g.unbundle(g.input('t', TYPES.tensorF32), [TYPES.abstract]), BbErrorCode.Type, "unbundle of value 't', which is ai.bytesandbrains.tensor.f32, not a composite"],
    ['a short literal', (g) => void g.constant({ dtype: 'float', dims: [3], data: new Float32Array(2) }), BbErrorCode.InvalidArgument, 'Constant: 8 data bytes given, the dims need 12'],
    ['a negative dim', (g) => void g.constant({ dtype: 'float', dims: [-1] }), BbErrorCode.InvalidArgument, 'Constant: dim 0 is -1 (negative, or the size overflows)'],
    ['a negative period', (g) => void g.interval(-1), BbErrorCode.InvalidArgument, "syscall Interval: attribute 'period_ns' is -1; it must be at least 1"],
    ['an empty gate', (g) => void g.gateDispatch(), BbErrorCode.InvalidArgument, 'syscall GateDispatch takes at least 1 inputs and gives 1 outputs; called with 0 and 1'],
    ['an unknown syscall', (g) => void g.syscall('Wait'), BbErrorCode.NotFound, "'Wait' is not a syscall the runtime implements"],
    ["the compiler's syscall", (g) => void g.syscall('DeadlineCheck', [x(g)]), BbErrorCode.InvalidArgument, 'syscall DeadlineCheck is inserted by the compiler; a Module does not record it'],
    ['a reserved topic', (g) => g.appEmit('bb.rounds', x(g)), BbErrorCode.InvalidArgument, "syscall AppEmit: topic 'bb.rounds' uses a reserved prefix"],
    ['a tensor held', (g) => g.hold('h').stash(g.input('t', TYPES.tensorF32)), BbErrorCode.Type, "syscall Hold.Stash keeps Bytes; input 0 is value 't' of type ai.bytesandbrains.tensor.f32"],
    ['a bad protocol domain', (g) => void g.protocolCall('ai.bytesandbrains.role.model', 'Hello'), BbErrorCode.InvalidArgument, "protocol domain 'ai.bytesandbrains.role.model' is not ai.bytesandbrains.protocol.<name>"],
    ['a vanilla split cut twice', (g) => g.split({ shape: 'vanilla', cuts: ['a', 'b'], clientModel: g.model('c'), serverModel: g.model('s'), server: g.input('server', TYPES.peerIds), tick: g.interval() }), BbErrorCode.InvalidArgument, 'split: a vanilla split is cut at 1 value; got 2'],
    ['a split in one slot', (g) => g.split({ shape: 'u', cuts: ['a', 'b'], clientModel: g.model('m'), serverModel: g.model('m'), server: g.input('server', TYPES.peerIds), tick: g.interval() }), BbErrorCode.InvalidArgument, "split: the client and the server hold their parts in one slot 'm'; give each its own"],
    ['a cut that names no value', (g) => g.split({ shape: 'vanilla', cuts: ['a,b'], clientModel: g.model('c'), serverModel: g.model('s'), server: g.input('server', TYPES.peerIds), tick: g.interval() }), BbErrorCode.InvalidArgument, "split: cut 'a,b' is not the name of a value"],
    ['a sender of no port', (g) => void g.lookupSender('nowhere'), BbErrorCode.NotFound, "'nowhere'"],
    ["the author's own error", (g) => g.fail('too many layers (99)', BbErrorCode.Limit), BbErrorCode.Limit, "module 'T': too many layers (99)"],
    ['the first error wins', (g) => { g.lookupOutput('first'); expect(g.failed).toBe(true); g.lookupOutput('second'); }, BbErrorCode.NotFound, "'first'"],
  ];

  for (const [what, body, code, message] of CASES) {
    test(what, () => {
      const T = module('T', body, { submodules: [Leaf, Empty, Typed, Capture, SelfCaller] });
      const error = bbErrorOf(() => T.build(bb));
      expect(error.message).toContain(message);
      expect(error.code, error.message).toBe(code);
    });
  }

  test('bad module names', () => {
    expect(bbErrorOf(() => module('Bad-Name', (g) => void g.input('x')).build(bb)).message).toContain("module name 'Bad-Name' is not allowed");
    expect(bbErrorOf(() => module('T__bootstrap', (g) => void g.input('x')).build(bb)).message).toContain("module name 'T__bootstrap'");
  });

  test('a value of an earlier build, a Graph outside its callback, a nested build', () => {
    let earlier: GraphValue | undefined;
    module('A', (g) => void (earlier = g.output('y', g.input('x')))).build(bb);
    expect(() => earlier!.name).toThrow(/the build that recorded this value is over/);
    const error = bbErrorOf(() => module('B', (g) => void g.output('y', earlier!)).build(bb));
    expect(error.message).toBe("module 'B': the value of output port 'y' is not a value of this recording (it comes from another build, or was altered)");
    expect(bbErrorOf(() => captured!.input('x')).message).toMatch(/this Graph records module 'Capture', whose callback is not running/);
    const nested = bbErrorOf(() =>
      module('N', (g) => {
        g.input('x');
        module('M', (h) => void h.input('x')).build(bb);
      }).build(bb),
    );
    expect(nested.message).toContain('a build is in progress already');
  });

  test("a callback's own exception ends the recording and is rethrown as it was", () => {
    class ModelMissing extends Error {}
    const thrown = new ModelMissing('no weights');
    expect(() =>
      module('T', (g) => {
        g.input('x');
        throw thrown;
      }).build(bb),
    ).toThrow(thrown);
    // the next build starts clean
    expect(module('T', (g) => void g.output('y', g.input('x'))).build(bb).length).toBeGreaterThan(0);
  });
});
