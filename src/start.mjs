// `npm start` enters here, in plain JavaScript that any Node runs, so that an old Node is told
// what is wrong instead of failing on the `.ts` extension before any of ragport's code runs.
const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
if (major < 22 || (major === 22 && minor < 18)) {
  process.stderr.write(
    `ragport needs Node.js 22.18 or newer (24 recommended), and this is Node.js ${process.versions.node}.\n`,
  );
  process.exit(1);
}

// npm runs this through a shell, which does not pass a SIGTERM on to us: when the shell or npm
// goes away, this process is reparented; it then shuts down as if signalled, so that stopping
// `npm start` by its pid never leaves a server holding the port.
const parent = process.ppid;
setInterval(() => {
  if (process.ppid !== parent) process.kill(process.pid, 'SIGTERM');
}, 250).unref();

await import('./server.ts');
