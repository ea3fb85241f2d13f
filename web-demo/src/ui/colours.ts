/**
 * The page's colours, the same in every view and every run: a peer class keeps its colour
 * by name (a server's partitions are blue in the program picture, and so is the server in
 * the federation), and client N keeps its own colour wherever it appears (its node, its
 * card, its curve and its legend entry), in the page's own federation as in the live one.
 */

/** The global model's curve. */
export const GLOBAL_COLOUR = '#0f172a';

/** Peer classes by the name the programs give them; a server's classes share its colour. */
const NAMED_CLASSES: Readonly<Record<string, string>> = {
  '@self': '#2563eb',
  server: '#2563eb',
  root: '#2563eb',
  edges: '#0e7490',
  edge: '#0e7490',
  clients: '#ea580c',
};

/** Other classes, in order of appearance (readable on white, apart from the named ones). */
const OTHER_CLASSES = ['#7c3aed', '#a16207', '#be185d', '#15803d', '#475569'];

/** A peer class's colour: by its name, else by its place among the program's other classes. */
export function classColour(peerClass: string, classes: readonly string[] = []): string {
  const named = NAMED_CLASSES[peerClass];
  if (named !== undefined) return named;
  const others = classes.filter((c) => NAMED_CLASSES[c] === undefined);
  const at = Math.max(0, others.indexOf(peerClass));
  return OTHER_CLASSES[at % OTHER_CLASSES.length]!;
}

/** The kinds of peer the page knows (src/program/peers.ts), in their classes' colours. */
const NAMED_KINDS: Readonly<Record<string, string>> = {
  server: '#2563eb',
  root: '#2563eb',
  edge: '#0e7490',
  client: '#ea580c',
};

/**
 * A partition's colour: the colour of the kind of peer that runs it when the program's
 * hosts are known (a split's clients run the invoking class, @self, and are still a
 * client's orange), else its class's.
 */
export function partitionColour(peer: string | undefined, peerClass: string, classes: readonly string[] = []): string {
  return (peer === undefined ? undefined : NAMED_KINDS[peer]) ?? classColour(peerClass, classes);
}

/**
 * Client N's own colour (index N - 1): distinct for the first ten, none of them the
 * server's blue, the global model's ink or the red of a lost envelope.
 */
const CLIENT_COLOURS = ['#ea580c', '#059669', '#9333ea', '#ca8a04', '#db2777', '#0891b2', '#65a30d', '#92400e', '#4f46e5', '#be123c'];

export function clientColour(index: number): string {
  return CLIENT_COLOURS[((index % CLIENT_COLOURS.length) + CLIENT_COLOURS.length) % CLIENT_COLOURS.length]!;
}

/** A peer's colour: its own when it is a numbered client or gossip peer, else its class's. */
export function peerColour(peer: { readonly peerClass: string; readonly index?: number | undefined }, classes: readonly string[] = []): string {
  return peer.index === undefined ? classColour(peer.peerClass, classes) : clientColour(peer.index);
}
