/**
 * web-demo: a bytesandbrains program as a picture, its federation running live (in Web
 * Workers of this page, or with other browsers and phones over WebRTC), and the learning
 * curves — using the npm package as any web app does.
 *
 * URL options: ?program=NAME[:MODULE], ?peers=N, ?latency=MS, ?lr=RATE, ?digits=K,
 * ?run=local|join|watch, ?threads=N|auto (the page's own engine; default auto).
 */
import './ui/locale.js';
import wasmUrl from 'bytesandbrains/bb.wasm?url';
import relaxedWasmUrl from 'bytesandbrains/bb-relaxed.wasm?url';
import threadedWasmUrl from 'bytesandbrains/bb-mt.wasm?url';
import threadedRelaxedWasmUrl from 'bytesandbrains/bb-mt-relaxed.wasm?url';
import cnnUrl from 'bytesandbrains/models/digits_cnn.onnx?url';
import {
  Compiler,
  Dataset,
  loadBb,
  relaxedSimdSupported,
  splitForFederation,
  splitLearning,
  type Bb,
} from 'bytesandbrains';
import { compileFederatedDigits } from 'bytesandbrains/examples';
import { inspectArtifact } from 'bytesandbrains/internals';

import { mlpShapeFromConfig } from '../shared/mlp.js';
import { scorer } from '../shared/rounds.js';
import { DIGITS, rotationDigits } from './federation/digits.js';
import { LiveSession, whyCannotJoin, type JoinResult, type LiveConfig } from './federation/live.js';
import { LocalRun, roundRules, type LocalProgram } from './federation/local.js';
import { FederationState, type Peer } from './federation/state.js';
import { FederationView, type PeerAction } from './federation/view.js';
import { JoinPanel } from './join/panel.js';
import { LearningCharts } from './learning/chart.js';
import { buildProgramGraph, type ProgramGraph } from './program/model.js';
import { modelLayers, splitPlanOptions, splitSides, splitTraffic, SPLIT_CUT, type SplitSides } from './program/split.js';
import { SplitView } from './program/split-view.js';
import { ProgramView } from './program/view.js';
import { clientColour } from './ui/colours.js';
import { $, el } from './ui/dom.js';
import { installTooltips } from './ui/tooltip.js';
import './style.css';

const params = new URLSearchParams(location.search);
const state = new FederationState();
const status = (text: string): void => {
  $('status').textContent = text;
};

interface Shown {
  readonly artifact: Uint8Array;
  readonly graph: ProgramGraph;
  /** The example it was compiled from, and which of its Modules; undefined for a dropped artifact. */
  readonly example?: string;
  readonly module?: number;
}

/** What the test (and the curious) can read: `window.demo`. */
const demo = {
  state,
  get rounds() {
    return state.rounds;
  },
  errors: [] as string[],
  problems: [] as string[],
  graph: undefined as ProgramGraph | undefined,
  run: undefined as LocalRun | undefined,
  live: undefined as LiveSession | undefined,
  joined: undefined as JoinResult | undefined,
  federationView: undefined as FederationView | undefined,
  programView: undefined as ProgramView | undefined,
  /** split_cnn: the model's layers on each side of the cut, as drawn. */
  split: undefined as SplitSides | undefined,
  /** The settings the last in-page run started with. */
  settings: undefined as { peers: number; latencyMs: number; learningRate: number; digits: number[][]; deadlineMs: number } | undefined,
  /** In-page runs started so far (a playground change starts another). */
  runs: 0,
  /** Which builds run and on how many threads. */
  engine: undefined as EngineFacts | undefined,
};
(window as unknown as { demo: typeof demo }).demo = demo;

/** The one-thread build for this engine, by the loader's rule: bb-relaxed.wasm where it runs relaxed SIMD, bb.wasm elsewhere. */
const singleBuild = (): string => (relaxedSimdSupported() ? 'bb-relaxed.wasm' : 'bb.wasm');
const singleUrl = (): string => (singleBuild() === 'bb.wasm' ? wasmUrl : relaxedWasmUrl);
/** The threaded twin of the single-threaded build, as the package's loader picks it. */
const threadedUrl = (): string => (singleBuild() === 'bb.wasm' ? threadedWasmUrl : threadedRelaxedWasmUrl);

async function loadModule(): Promise<WebAssembly.Module> {
  const response = await fetch(singleUrl());
  if (!response.ok) throw new Error(`${singleBuild()}: ${response.status} ${response.statusText}`);
  return WebAssembly.compileStreaming(response);
}

let peerModule: Promise<WebAssembly.Module> | undefined;
/**
 * The in-page peers' module, compiled once when the first in-page run starts: a page that
 * only joins or watches (on a threaded module when isolated) never downloads it.
 */
const peersModule = (): Promise<WebAssembly.Module> => (peerModule ??= loadModule());

/**
 * Threads for the page's own engine (the live client's training, compiling, the data):
 * ?threads=N (1 to 64) or auto, default auto — one per core, bb-mt-relaxed.wasm (bb-mt.wasm
 * where the engine lacks relaxed SIMD) on Web Workers when
 * the page is cross-origin isolated (serve.mjs makes it so), one thread and the reason
 * otherwise. The in-page federation's peers are Web Workers already, one per peer, so each
 * runs its engine on one thread: a pool in each would only contend for the same cores.
 */
function pageThreads(): number | 'auto' {
  const asked = params.get('threads');
  if (asked === null || asked === 'auto') return 'auto';
  const n = Number(asked);
  if (!Number.isInteger(n) || n < 1 || n > 64) throw new Error(`?threads takes auto or 1 to 64, not ${JSON.stringify(asked)}`);
  return n;
}

/** What the page says of its engine: the build and threads of its own, and its in-page peers'. */
interface EngineFacts {
  readonly crossOriginIsolated: boolean;
  /** The page's own engine: bb-mt-relaxed.wasm, bb-mt.wasm, bb-relaxed.wasm or bb.wasm. */
  readonly build: string;
  readonly threads: number;
  /** Why the page's engine runs on one thread, when more were asked for and cannot be had. */
  readonly threadsUnavailable?: string;
  /** The in-page federation's peers, one thread each. */
  readonly peerBuild: string;
}

function engineFacts(bb: Bb): EngineFacts {
  const build = bb.threads > 1 ? (bb.simd === 'relaxed' ? 'bb-mt-relaxed.wasm' : 'bb-mt.wasm') : bb.simd === 'relaxed' ? 'bb-relaxed.wasm' : 'bb.wasm';
  return {
    crossOriginIsolated: globalThis.crossOriginIsolated === true,
    build,
    threads: bb.threads,
    ...(bb.threadsUnavailable === undefined ? {} : { threadsUnavailable: bb.threadsUnavailable }),
    peerBuild: singleBuild(),
  };
}

function showEngine(facts: EngineFacts): void {
  const threads = facts.threads === 1 ? 'one thread' : `${facts.threads} threads (Web Workers on shared memory)`;
  // browsers isolate only secure contexts (https, or localhost): over plain http from another host the headers cannot help
  const reason = facts.threadsUnavailable === undefined ? undefined
    : window.isSecureContext ? facts.threadsUnavailable
    : 'this page came over plain http from another host, and browsers give shared memory (cross-origin isolation) only to https pages and localhost';
  const why = reason === undefined ? '' : ` — not more, because ${reason}`;
  $('engine').textContent =
    `This page's engine: ${facts.build} on ${threads}${why}. ` +
    `The in-page federation's peers: ${facts.peerBuild}, one thread each (one Web Worker per peer).`;
}

async function loadConfig(): Promise<LiveConfig | undefined> {
  try {
    const response = await fetch('config.json', { cache: 'no-store' });
    if (!response.ok) return undefined;
    const config = (await response.json()) as LiveConfig;
    return config.live ? config : undefined;
  } catch {
    return undefined;
  }
}

/** The in-page federation's settings: the playground's and the controls'. */
interface RunSettings {
  readonly peers: number;
  readonly latencyMs: number;
  readonly learningRate: number;
}

/** Compiles an example; federated_digits with FedAvg's rounds fitted to the clients and the latency. */
function compileExample(bb: Bb, example: string, module: number, run: RunSettings): Uint8Array {
  if (example === 'split_cnn' && module === SPLIT_FED) return splitLearning(splitPlanOptions(run.peers)).compile(bb);
  if (example === 'federated_digits') return compileFederatedDigits(bb, { ...roundRules(run.peers, run.latencyMs), learningRate: run.learningRate });
  const compiler = Compiler.forExample(bb, example, module);
  try {
    return compiler.compile(Compiler.recordExample(bb, example, module));
  } finally {
    compiler.free();
  }
}

function programOf(bb: Bb, artifact: Uint8Array, example?: string, module = 0): Shown {
  const graph = buildProgramGraph(Compiler.describe(bb, artifact, 'json'), inspectArtifact(artifact));
  return { artifact, graph, ...(example === undefined ? {} : { example, module }) };
}

/** split_cnn's SplitFed Module: the split the page runs, compiled from the splitLearning template for the clients chosen. */
const SPLIT_FED = 2;
const RUNNABLE: ReadonlySet<string> = new Set<LocalProgram>(['federated_digits', 'gossip_digits', 'split_cnn']);
const RUNNABLE_TEXT = 'only federated_digits, gossip_digits and split_cnn (module 3, SplitFed) have data to learn from in this page';

/** What the page says while a program runs. */
const RUNNING: Readonly<Record<LocalProgram, string>> = {
  federated_digits: 'Running: the server sends the global model to every client, each trains on its own digits and sends its update back. Pause or kill a client below and watch what the rounds do.',
  gossip_digits: 'Running: every peer trains, sends its model to a peer it picks and mixes in what it gets; grey dots are views being exchanged.',
  split_cnn: "Running: each client runs the CNN's convolutions on a batch of its digits and sends the activations at the cut to the server, which runs the rest and the loss and sends the gradients back; every 10 steps the server averages the clients' convolutions (SplitFed). A step waits for its gradients, so the latency sets the pace.",
};

/** Whether the page runs this program: the digits examples, and split_cnn's SplitFed Module. */
function runnable(shown: Shown | undefined): boolean {
  if (shown?.example === undefined || !RUNNABLE.has(shown.example)) return false;
  return shown.example !== 'split_cnn' || shown.module === SPLIT_FED;
}

/** Digits per client by default: six of ten from four federated clients up (every digit on several), all below; three per gossip peer. */
function defaultDigitsPerClient(program: string, peers: number): number {
  if (program === 'gossip_digits') return 3;
  return peers >= 4 ? 6 : DIGITS;
}

async function main(): Promise<void> {
  installTooltips();
  status('loading the engine…');
  const [bb, csv, config] = await Promise.all([
    loadBb(singleUrl(), { threads: pageThreads(), threadedSource: threadedUrl() }),
    fetch('digits.csv').then(async (r) => {
      if (!r.ok) throw new Error(`digits.csv: ${r.status}`);
      return new Uint8Array(await r.arrayBuffer());
    }),
    loadConfig(),
  ]);
  demo.engine = engineFacts(bb);
  showEngine(demo.engine);
  const allDigits = Dataset.fromCsv(bb, csv);
  const labels = allDigits.labels().data as Float32Array;
  const programView = new ProgramView($('program'));
  demo.programView = programView;
  const federationView = new FederationView($('federation'), state);
  demo.federationView = federationView;
  new LearningCharts($('learning'), state);
  const splitView = new SplitView($('split-model'));
  state.subscribe(() => {
    programView.updateCounts(state.edges);
    if (shown !== undefined) splitView.update(splitTraffic(shown.graph, state.edges));
  });
  let cnn: Promise<Uint8Array> | undefined;
  const loadCnn = (): Promise<Uint8Array> =>
    (cnn ??= fetch(cnnUrl).then(async (r) => {
      if (!r.ok) throw new Error(`digits_cnn.onnx: ${r.status}`);
      return new Uint8Array(await r.arrayBuffer());
    }));

  const select = $('program-select') as HTMLSelectElement;
  const peersSelect = $('peer-count') as HTMLSelectElement;
  const latencySelect = $('latency') as HTMLSelectElement;
  const rateSelect = $('learning-rate') as HTMLSelectElement;
  const perClient = $('digits-per-client') as HTMLInputElement;
  const playground = $('playground') as HTMLDetailsElement;
  const start = $('start') as HTMLButtonElement;
  const stop = $('stop') as HTMLButtonElement;
  const reset = $('reset') as HTMLButtonElement;
  for (const example of Compiler.examples(bb)) {
    for (let m = 0; m < example.modules; m++) {
      const label = example.modules > 1 ? `${example.name} (module ${m + 1} of ${example.modules})` : example.name;
      select.append(el('option', { value: `${example.name}:${m}`, title: example.description }, label));
    }
  }
  const wanted = params.get('program') ?? 'federated_digits';
  select.value = wanted.includes(':') ? wanted : `${wanted}:0`;
  if (params.has('peers')) peersSelect.value = params.get('peers')!;
  if (params.has('latency')) latencySelect.value = params.get('latency')!;
  if (params.has('lr')) rateSelect.value = params.get('lr')!;
  playground.open = window.innerWidth >= 700;

  let shown: Shown | undefined;
  let run: LocalRun | undefined;
  let live: LiveSession | undefined;
  const peers = (): number => Number(peersSelect.value);
  const exampleName = (): string => select.value.split(':')[0]!;
  const settings = (): RunSettings => ({ peers: peers(), latencyMs: Number(latencySelect.value), learningRate: Number(rateSelect.value) });
  const running = (): boolean => run !== undefined && state.info.mode !== 'stopped';

  // ---- the playground: which digits each client holds ------------------------------------
  let digits: number[][] = [];
  const dealDigits = (): void => {
    $('digits-per-client-value').textContent = perClient.value;
    digits = Array.from({ length: peers() }, (_, c) => rotationDigits(c, Number(perClient.value)));
    drawDigits();
  };
  const drawDigits = (): void => {
    const word = exampleName() === 'gossip_digits' ? 'peer' : 'client';
    $('digit-grid').replaceChildren(
      ...digits.map((held, c) =>
        el('div', { class: 'digit-row', 'data-client': c },
          el('span', { class: 'digit-owner', style: `border-color:${clientColour(c)}` }, `${word} ${c + 1}`),
          ...Array.from({ length: DIGITS }, (_, d) =>
            el('button', { type: 'button', class: 'digit', 'data-client': c, 'data-digit': d, 'aria-pressed': held.includes(d) ? 'true' : 'false', 'aria-label': `${word} ${c + 1} holds digit ${d}` }, String(d))),
        )),
    );
    const holders = Array.from({ length: DIGITS }, (_, d) => digits.filter((held) => held.includes(d)).length);
    const missing = holders.flatMap((n, d) => (n === 0 ? [d] : []));
    const fewest = Math.min(...holders);
    $('digit-note').textContent = missing.length === 0
      ? `Every digit is on ${fewest === 1 ? 'one' : `${fewest}`} ${word}${fewest === 1 ? '' : 's'} or more.`
      : `No ${word} holds ${missing.length === 1 ? 'digit' : 'digits'} ${missing.join(', ')}: the ${word === 'client' ? 'global model' : 'peers'} cannot learn ${missing.length === 1 ? 'it' : 'them'}.`;
  };
  $('digit-grid').addEventListener('click', (event) => {
    const cell = event.target instanceof Element ? event.target.closest('button[data-digit]') : null;
    if (cell === null) return;
    const c = Number(cell.getAttribute('data-client'));
    const d = Number(cell.getAttribute('data-digit'));
    const held = digits[c]!;
    if (held.includes(d) && held.length === 1) {
      $('digit-note').textContent = `Each needs at least one digit to train on.`;
      return;
    }
    digits[c] = held.includes(d) ? held.filter((x) => x !== d) : [...held, d].sort((a, b) => a - b);
    drawDigits();
    void rerun();
  });
  perClient.oninput = () => {
    $('digits-per-client-value').textContent = perClient.value;
  };
  perClient.onchange = () => {
    dealDigits();
    void rerun();
  };
  rateSelect.onchange = () => void rerun();

  const controls = {
    actions(peer: Peer): readonly PeerAction[] {
      if (run === undefined || peer.place !== 'worker' || state.info.mode === 'stopped' || !run.isAlive(peer.id)) return [];
      const pause = run.isPaused(peer.id) ? 'resume' : 'pause';
      // the server is not killed: without it there is no federation left to watch
      return peer.id === run.serverId ? [pause] : [pause, 'kill'];
    },
    act(peer: Peer, action: PeerAction): void {
      if (run === undefined) return;
      if (action === 'kill') run.kill(peer.id);
      else run.setPaused(peer.id, action === 'pause');
      const what = { kill: 'killed: what is sent to it is lost; the rounds close without it at their deadline while enough others answer', pause: 'paused: envelopes wait for it', resume: 'resumed' };
      status(`${peer.label}: ${what[action]}`);
      federationView.setContext(shown?.graph, controls);
    },
  };

  const refreshButtons = (): void => {
    const canRun = runnable(shown);
    start.disabled = !canRun || running() || live !== undefined;
    stop.disabled = !running();
    peersSelect.disabled = latencySelect.disabled = running();
    start.title = canRun ? '' : `It is drawn, not run: ${RUNNABLE_TEXT}`;
    playground.hidden = live !== undefined || !canRun;
    rateSelect.disabled = exampleName() !== 'federated_digits';
  };

  const show = async (next: Shown): Promise<void> => {
    shown = next;
    demo.graph = next.graph;
    await programView.show(next.graph);
    federationView.setContext(next.graph, controls);
    // split_cnn's vanilla Modules (one cut): the model drawn cut in two
    const split = next.example === 'split_cnn' && next.module !== 1 ? splitSides(modelLayers(await loadCnn()), SPLIT_CUT) : undefined;
    demo.split = split;
    splitView.show(split);
    refreshButtons();
  };

  const showSelected = async (): Promise<void> => {
    const [name, m] = select.value.split(':');
    $('peer-word').textContent = name === 'gossip_digits' ? 'peers' : 'clients';
    try {
      await show(programOf(bb, compileExample(bb, name!, Number(m ?? 0), settings()), name, Number(m ?? 0)));
      const rules = name === 'federated_digits' ? roundRules(peers(), settings().latencyMs) : undefined;
      status(`${name}: ${shown!.graph.partitions.length} partition${shown!.graph.partitions.length === 1 ? '' : 's'}, ${shown!.graph.edges.length} wire edge${shown!.graph.edges.length === 1 ? '' : 's'}. ${runnable(shown) ? 'Press Start to run it in this page.' : `It is drawn, not run: ${RUNNABLE_TEXT}.`}${rules === undefined ? '' : ` Its rounds wait ${rules.deadlineMs / 1000} s for every client, room for the round trip at this latency.`}`);
    } catch (error) {
      fail(error);
    }
  };

  const stopRun = (): void => {
    run?.stop();
    refreshButtons();
    federationView.setContext(shown?.graph, controls);
  };

  /** A setting changed: compiled again, and a running federation starts again with it. */
  const rerun = async (): Promise<void> => {
    const was = running();
    stopRun();
    if (was) run = undefined;
    await showSelected();
    if (was) await startRun();
  };

  select.onchange = () => {
    stopRun();
    run = undefined;
    state.reset();
    perClient.value = String(defaultDigitsPerClient(exampleName(), peers()));
    dealDigits();
    void showSelected();
  };
  peersSelect.onchange = () => {
    perClient.value = String(defaultDigitsPerClient(exampleName(), peers()));
    dealDigits();
    void showSelected();
  };
  latencySelect.onchange = () => void rerun();
  ($('artifact-file') as HTMLInputElement).onchange = async (event) => {
    const file = (event.target as HTMLInputElement).files?.[0];
    if (file !== undefined) await showFile(file);
  };
  const showFile = async (file: File): Promise<void> => {
    try {
      stopRun();
      run = undefined;
      state.reset();
      await show(programOf(bb, new Uint8Array(await file.arrayBuffer())));
      status(`${file.name}: ${shown!.graph.partitions.length} partitions, ${shown!.graph.edges.length} wire edges (a dropped artifact is drawn, not run)`);
    } catch (error) {
      status(`${file.name} is not a compiled artifact: ${error instanceof Error ? error.message : String(error)}`);
    }
  };
  document.addEventListener('dragover', (event) => event.preventDefault());
  document.addEventListener('drop', (event) => {
    event.preventDefault();
    const file = event.dataTransfer?.files[0];
    if (file !== undefined) void showFile(file);
  });

  const startRun = async (): Promise<void> => {
    if (shown === undefined || !runnable(shown)) return;
    stopRun();
    const program = shown.example as LocalProgram;
    const model = program === 'split_cnn' ? await loadCnn() : undefined;
    const module = await peersModule();
    const s = settings();
    const split = splitForFederation(labels, { shards: s.peers, shardClasses: digits, seed: 1 });
    const test = allDigits.subset(split.test);
    const x = test.features().data as Float32Array;
    const y = test.labels().data as Float32Array;
    test.free();
    const shape = mlpShapeFromConfig(inspectArtifact(shown.artifact).configs.get('model') ?? '');
    run = new LocalRun(state, {
      program,
      peers: s.peers,
      latencyMs: s.latencyMs,
      artifact: shown.artifact,
      graph: shown.graph,
      module,
      csv,
      shards: split.shards,
      test: split.test,
      digits,
      ...(shape === undefined ? {} : { score: scorer(shape, { x, y })! }),
      ...(model === undefined ? {} : { model }),
      onProblem: (peer, text) => {
        demo.problems.push(`${state.peers.get(peer)?.label ?? peer}: ${text}`);
      },
    });
    demo.run = run;
    demo.runs++;
    demo.settings = { ...s, digits: digits.map((d) => [...d]), deadlineMs: roundRules(s.peers, s.latencyMs).deadlineMs };
    federationView.setContext(shown.graph, controls);
    refreshButtons();
    status(`starting ${s.peers} ${program === 'gossip_digits' ? 'gossip peers' : 'clients and a server'}, each in a Web Worker of this page…`);
    const started = run;
    await run.start();
    if (run !== started) return;
    refreshButtons();
    federationView.setContext(shown.graph, controls);
    status(RUNNING[program]);
  };
  start.onclick = () => void startRun();
  stop.onclick = () => {
    stopRun();
    status('Stopped. Start again, or Reset to clear the charts.');
  };
  reset.onclick = () => {
    stopRun();
    run = undefined;
    state.reset();
    void showSelected();
  };

  // ---- the live federation -----------------------------------------------------------------
  const blocked = config === undefined ? undefined : whyCannotJoin();
  const panel = new JoinPanel($('join-bar'), $('join'), config, {
    join: () => void joinLive(),
    watch: () => watchLive(),
  }, blocked?.text);
  const openLive = async (): Promise<void> => {
    stopRun();
    run = undefined;
    state.reset();
    panel.join.disabled = panel.watch.disabled = true;
    const artifact = new Uint8Array(await (await fetch('artifact.bin')).arrayBuffer());
    await show(programOf(bb, artifact, 'live'));
    live = new LiveSession(bb, state, config!);
    demo.live = live;
    live.onStatus = (s) => panel.showSeats(s.seats, live?.self);
    refreshButtons();
  };
  const joinLive = async (): Promise<void> => {
    if (blocked !== undefined) {
      watchLive(`${blocked.text} Watching instead.`);
      return;
    }
    try {
      await openLive();
      status('joining the live federation…');
      const result = await live!.join(shown!.artifact, csv, shown!.graph);
      demo.joined = result;
      if (!result.joined) {
        panel.say(result.refused === true ? `No seat for this page: ${result.reason}. Watching instead.` : `This page could not join: ${result.reason}${result.released ? ' (its seat was given back)' : ''}. Watching instead.`);
        live!.watch();
        status('watching the live federation');
        return;
      }
      panel.you(result.seat, `${result.restored ? 'Your node came back as it was before the reload. ' : ''}This page trains on its own share of the digits (${live!.digitsOf(result.seat)}) and sends its updates to the server.`);
      panel.say('');
      status(`live: you are client ${result.seat + 1} of ${config!.clients}`);
    } catch (error) {
      fail(error);
    }
  };
  const watchLive = (why?: string): void => {
    void openLive().then(() => {
      live!.watch();
      panel.say(why === undefined ? 'Watching: envelopes are replayed as the server saw them.' : why);
      status('watching the live federation');
    }, fail);
  };

  let width = window.innerWidth;
  window.addEventListener('resize', () => {
    if (Math.abs(window.innerWidth - width) < 40) return;
    width = window.innerWidth;
    void programView.redraw();
  });

  perClient.value = params.get('digits') ?? String(defaultDigitsPerClient(exampleName(), peers()));
  dealDigits();
  await showSelected();
  const auto = params.get('run');
  if (auto === 'local') void startRun();
  else if (auto === 'join' && config !== undefined) void joinLive();
  else if (auto === 'watch' && config !== undefined) watchLive();
}

function fail(error: unknown): void {
  const text = error instanceof Error ? error.message : String(error);
  status(`error: ${text}`);
  demo.errors.push(text);
  console.error(error);
}

main().catch(fail);
