/**
 * web-demo: a bytesandbrains program as a picture, its federation running live (in Web
 * Workers of this page, or with other browsers and phones over WebRTC), and the learning
 * curves — using the npm package as any web app does.
 *
 * URL options: ?program=NAME[:MODULE], ?peers=N, ?latency=MS, ?run=local|join|watch.
 */
import wasmUrl from 'bytesandbrains/bb.wasm?url';
import {
  Compiler,
  compileFederatedDigits,
  inspectArtifact,
  loadBb,
  splitDigits,
  type Bb,
} from 'bytesandbrains';

import { mlpShapeFromConfig } from '../shared/mlp.js';
import { scorer } from '../shared/rounds.js';
import { LiveSession, type JoinResult, type LiveConfig } from './federation/live.js';
import { LocalRun, roundSizes, type LocalProgram } from './federation/local.js';
import { FederationState, type Peer } from './federation/state.js';
import { FederationView, type PeerAction } from './federation/view.js';
import { JoinPanel } from './join/panel.js';
import { LearningCharts } from './learning/chart.js';
import { buildProgramGraph, type ProgramGraph } from './program/model.js';
import { ProgramView } from './program/view.js';
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
  /** The example it was compiled from; undefined for a dropped artifact. */
  readonly example?: string;
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
};
(window as unknown as { demo: typeof demo }).demo = demo;

async function loadModule(): Promise<WebAssembly.Module> {
  const response = await fetch(wasmUrl);
  if (!response.ok) throw new Error(`bb.wasm: ${response.status} ${response.statusText}`);
  return WebAssembly.compileStreaming(response);
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

/** Compiles an example; federated_digits with FedAvg sized for the in-page clients. */
function compileExample(bb: Bb, example: string, module: number, peers: number): Uint8Array {
  if (example === 'federated_digits') return compileFederatedDigits(bb, roundSizes(peers));
  const compiler = Compiler.forExample(bb, example, module);
  try {
    return compiler.compile(Compiler.recordExample(bb, example, module));
  } finally {
    compiler.free();
  }
}

function programOf(bb: Bb, artifact: Uint8Array, example?: string): Shown {
  const graph = buildProgramGraph(Compiler.describe(bb, artifact, 'json'), inspectArtifact(artifact));
  return { artifact, graph, ...(example === undefined ? {} : { example }) };
}

const RUNNABLE: ReadonlySet<string> = new Set<LocalProgram>(['federated_digits', 'gossip_digits']);

async function main(): Promise<void> {
  installTooltips();
  status('loading bb.wasm…');
  const [module, csv, config] = await Promise.all([
    loadModule(),
    fetch('digits.csv').then(async (r) => {
      if (!r.ok) throw new Error(`digits.csv: ${r.status}`);
      return new Uint8Array(await r.arrayBuffer());
    }),
    loadConfig(),
  ]);
  const bb = await loadBb(module);
  const programView = new ProgramView($('program'));
  const federationView = new FederationView($('federation'), state);
  demo.federationView = federationView;
  new LearningCharts($('learning'), state);
  state.subscribe(() => programView.updateCounts(state.edges));

  const select = $('program-select') as HTMLSelectElement;
  const peersSelect = $('peer-count') as HTMLSelectElement;
  const latencySelect = $('latency') as HTMLSelectElement;
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

  let shown: Shown | undefined;
  let run: LocalRun | undefined;
  let live: LiveSession | undefined;
  const peers = (): number => Number(peersSelect.value);

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
      const what = { kill: 'killed: what is sent to it is lost; the rounds close without it once their deadline passes', pause: 'paused: envelopes wait for it', resume: 'resumed' };
      status(`${peer.label}: ${what[action]}`);
      federationView.setContext(shown?.graph, controls);
    },
  };

  const refreshButtons = (): void => {
    const runnable = shown?.example !== undefined && RUNNABLE.has(shown.example);
    start.disabled = !runnable || (run !== undefined && state.info.mode !== 'stopped') || live !== undefined;
    stop.disabled = run === undefined || state.info.mode === 'stopped';
    peersSelect.disabled = latencySelect.disabled = run !== undefined && state.info.mode !== 'stopped';
    start.title = runnable ? '' : 'Only federated_digits and gossip_digits have data to learn from in the page';
  };

  const show = async (next: Shown): Promise<void> => {
    shown = next;
    demo.graph = next.graph;
    await programView.show(next.graph);
    federationView.setContext(next.graph, controls);
    refreshButtons();
  };

  const showSelected = async (): Promise<void> => {
    const [name, m] = select.value.split(':');
    $('peer-word').textContent = name === 'gossip_digits' ? 'peers' : 'clients';
    try {
      await show(programOf(bb, compileExample(bb, name!, Number(m ?? 0), peers()), name));
      status(`${name}: ${shown!.graph.partitions.length} partition${shown!.graph.partitions.length === 1 ? '' : 's'}, ${shown!.graph.edges.length} wire edge${shown!.graph.edges.length === 1 ? '' : 's'}. ${RUNNABLE.has(name!) ? 'Press Start to run it in this page.' : ''}`);
    } catch (error) {
      fail(error);
    }
  };

  const stopRun = (): void => {
    run?.stop();
    refreshButtons();
    federationView.setContext(shown?.graph, controls);
  };

  select.onchange = () => {
    stopRun();
    run = undefined;
    state.reset();
    void showSelected();
  };
  peersSelect.onchange = () => void showSelected();
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

  start.onclick = async () => {
    if (shown?.example === undefined || !RUNNABLE.has(shown.example)) return;
    stopRun();
    const program = shown.example as LocalProgram;
    const shape = mlpShapeFromConfig(inspectArtifact(shown.artifact).configs.get('model') ?? '');
    const split = splitDigits(bb, csv, peers(), 1, 0);
    const x = split.test.features().data as Float32Array;
    const y = split.test.labels().data as Float32Array;
    split.free();
    run = new LocalRun(state, {
      program,
      peers: peers(),
      latencyMs: Number(latencySelect.value),
      artifact: shown.artifact,
      graph: shown.graph,
      module,
      csv,
      ...(shape === undefined ? {} : { score: scorer(shape, { x, y })! }),
      onProblem: (peer, text) => {
        demo.problems.push(`${state.peers.get(peer)?.label ?? peer}: ${text}`);
      },
    });
    demo.run = run;
    federationView.setContext(shown.graph, controls);
    refreshButtons();
    status(`starting ${peers()} ${program === 'federated_digits' ? 'clients and a server' : 'gossip peers'}, each in a Web Worker of this page…`);
    await run.start();
    refreshButtons();
    federationView.setContext(shown.graph, controls);
    status(
      program === 'federated_digits'
        ? 'Running: the server sends the global model to every client, each trains on its own digits and sends its update back. Pause or kill a client below: the rounds go on.'
        : 'Running: every peer trains, sends its model to a peer it picks and mixes in what it gets; grey dots are views being exchanged.',
    );
  };
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

  const panel = new JoinPanel($('join'), config, {
    join: () => void joinLive(),
    watch: () => watchLive(),
  });
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
    try {
      await openLive();
      status('joining the live federation…');
      const result = await live!.join(shown!.artifact, csv, shown!.graph);
      demo.joined = result;
      if (!result.joined) {
        panel.say(`No seat for this page: ${result.reason}. Watching instead.`);
        live!.watch();
        status('watching the live federation');
        return;
      }
      panel.say(`You are client ${result.seat + 1}${result.restored ? ' again (your node came back as it was before the reload)' : ''}: this page trains on its own digits and sends its updates to the server.`);
      status(`live: client ${result.seat + 1} of ${config!.clients}`);
    } catch (error) {
      fail(error);
    }
  };
  const watchLive = (): void => {
    void openLive().then(() => {
      live!.watch();
      panel.say('Watching: envelopes are replayed as the server saw them.');
      status('watching the live federation');
    }, fail);
  };

  let width = window.innerWidth;
  window.addEventListener('resize', () => {
    if (Math.abs(window.innerWidth - width) < 40) return;
    width = window.innerWidth;
    void programView.redraw();
  });

  await showSelected();
  const auto = params.get('run');
  if (auto === 'local') start.click();
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
