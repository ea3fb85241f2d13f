#!/usr/bin/env node
// The package's command: `npx bytesandbrains serve --model FILE.onnx --test FILE.csv ...`
// runs a federated-averaging server with no code (`npx bytesandbrains serve --help`).
const USAGE = `usage: bytesandbrains serve [options]   a federated-averaging server from flags or a JSON file
       bytesandbrains serve --help            its options
(also in this package: bytesandbrains-signal, a signalling server alone, and
bytesandbrains-token, operator keys and join tokens)`;

const [command, ...rest] = process.argv.slice(2);
if (command === 'serve') {
  const { main } = await import('../dist/serve/cli.js');
  // node-datachannel's threads would keep Node running after the server stopped
  process.exit(await main(rest));
}
if (command === undefined || command === '--help' || command === '-h' || command === 'help') {
  console.log(USAGE);
  process.exit(0);
}
console.error(`bytesandbrains: unknown command ${JSON.stringify(command)}\n${USAGE}`);
process.exit(2);
