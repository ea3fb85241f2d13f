// Client peers of bench/connections.mjs: COUNT transports in this process, each linking to
// the server peer and sending it a 1 KiB envelope a second.
//   node bench/connections-client.mjs SIGNAL_URL SERVER_PEER COUNT
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const pkg = join(dirname(fileURLToPath(import.meta.url)), '..', 'js', 'dist');
const { Identity } = await import(join(pkg, 'identity', 'index.js'));
const { SignalClient } = await import(join(pkg, 'signal', 'index.js'));
const { WebRtcTransport } = await import(join(pkg, 'transport', 'index.js'));

const [url, server, count] = process.argv.slice(2);
const envelope = new Uint8Array(1024);
for (let i = 0; i < Number(count); i++) {
  const identity = await Identity.generate();
  const transport = await WebRtcTransport.create({
    signal: await SignalClient.connect({ url, room: 'bench', identity }),
    rtcConfig: { iceServers: [], bindAddress: '127.0.0.1' }, connectTimeoutMs: 60_000,
  });
  transport.connect(server);
  setInterval(() => {
    if (transport.state(server) === 'open') transport.send(server, envelope);
  }, 1000);
}
