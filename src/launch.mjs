// `npm start`, `npm run worker` and `npm run keys` enter through here, in plain JavaScript that any
// Node runs, so that an old Node is told what is wrong instead of failing on the `.ts` extension
// before any of ragport's code runs.

/**
 * Checks the Node version, then imports `entry` (a URL). With `stopWithParent`, a process started
 * through npm (which runs it through a shell that does not pass a SIGTERM on) shuts down as if
 * signalled once that shell or npm goes away, so stopping `npm start` or `npm run worker` by its
 * pid never leaves a server holding the port or a worker holding jobs.
 */
export async function launch(entry, { stopWithParent = false } = {}) {
  const tooOld = unsupportedNode();
  if (tooOld !== undefined) {
    process.stderr.write(`${tooOld}\n`);
    process.exit(1);
  }
  if (stopWithParent) {
    const parent = process.ppid;
    setInterval(() => {
      if (process.ppid !== parent) process.kill(process.pid, 'SIGTERM');
    }, 250).unref();
  }
  await import(entry);
}

/** The sentence saying this Node is too old for ragport, or undefined when it is new enough. */
export function unsupportedNode() {
  const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
  if (major > 22 || (major === 22 && minor >= 18)) return undefined;
  return `ragport needs Node.js 22.18 or newer (24 recommended), and this is Node.js ${process.versions.node}.`;
}
