/**
 * A child process for the spawner's tests: answers every message with `{ echo: message }`, writes
 * `stderr` messages' text to stderr, and exits with the code of an `exit` message.
 */
type Order = { stderr: string } | { exit: number } | { hang: true } | Record<string, unknown>;

process.on('message', (order: Order) => {
  if ('stderr' in order) process.stderr.write(String(order.stderr));
  if ('exit' in order) process.exit(Number(order.exit));
  if ('hang' in order) for (;;) {}
  process.send?.({ echo: order });
});
process.on('disconnect', () => process.exit(0));
process.send?.({ ready: true, argv: process.execArgv, env: Object.keys(process.env) });
