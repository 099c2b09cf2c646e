import { lookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';

/**
 * Where a webhook may be sent. Checked on the resolved addresses at every delivery (a name that
 * resolved to a public address yesterday may resolve to 127.0.0.1 today), and the connection goes
 * to the very address that was checked, so a second lookup cannot swap it (DNS rebinding).
 */
// Two lists: a BlockList also matches IPv4 addresses against IPv4-mapped IPv6 rules.
const blockedV4 = new BlockList();
const blockedV6 = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const) {
  blockedV4.addSubnet(net, prefix, 'ipv4');
}
for (const [net, prefix] of [
  ['::', 128],
  ['::1', 128],
  // IPv4-compatible (deprecated) addresses, ::a.b.c.d: [::127.0.0.1] was accepted.
  ['::', 96],
  // IPv4-mapped addresses (::ffff:a.b.c.d) are refused whatever they map to.
  ['::ffff:0:0', 96],
  ['64:ff9b::', 96],
  // Local-use NAT64, and 6to4 and Teredo, which carry an IPv4 address inside (2002:7f00:1:: is
  // 127.0.0.1 through a relay).
  ['64:ff9b:1::', 48],
  ['2002::', 16],
  ['2001::', 32],
  ['100::', 64],
  ['2001:db8::', 32],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
] as const) {
  blockedV6.addSubnet(net, prefix, 'ipv6');
}

export function isPublicAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 0) return false;
  return family === 6 ? !blockedV6.check(address, 'ipv6') : !blockedV4.check(address, 'ipv4');
}

export type TargetCheck = { ok: true; address: string; family: 4 | 6 } | { ok: false; reason: string };

/** The URL's host without the brackets of an IPv6 literal. */
const hostOf = (url: URL) => url.hostname.replace(/^\[|\]$/g, '');

/**
 * The address a URL's host names by itself, if it is an IP literal, and whether it may be sent to.
 * The URL parser has already normalised every spelling of one (2130706433, 0x7f.1, 127.1 and
 * 127.0.0.1. are all 127.0.0.1; [::ffff:127.0.0.1] is [::ffff:7f00:1]), so this sees what a
 * connection would reach. Undefined for a host name: only a lookup says where it points, and
 * that can change, so names are checked at each delivery (`checkTarget`).
 */
export function checkLiteralTarget(url: URL, allowPrivate: boolean): TargetCheck | undefined {
  const host = hostOf(url);
  const family = isIP(host);
  if (family === 0) return undefined;
  if (!allowPrivate && !isPublicAddress(host)) {
    return {
      ok: false,
      reason: `${host} is a non-public address; set WEBHOOK_ALLOW_PRIVATE_TARGETS=true to allow it`,
    };
  }
  return { ok: true, address: host, family: family === 6 ? 6 : 4 };
}

/**
 * `pending`, or a rejection once `signal` aborts. A lookup cannot be cancelled (getaddrinfo runs on
 * libuv's pool), but the attempt need not wait for it: a slow resolver held attempts 10 s and
 * more past their timeout (64 lookups at once), each holding a sender slot.
 */
function withinDeadline<T>(pending: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (signal === undefined) return pending;
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise<T>((resolve, reject) => {
    const abort = () => reject(signal.reason as Error);
    signal.addEventListener('abort', abort, { once: true });
    pending.then(resolve, reject).finally(() => signal.removeEventListener('abort', abort));
  });
}

/** Resolves the URL's host (until `signal` aborts) and picks an address it may be sent to. */
export async function checkTarget(url: URL, allowPrivate: boolean, signal?: AbortSignal): Promise<TargetCheck> {
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return { ok: false, reason: 'not an http(s) URL' };
  const literal = checkLiteralTarget(url, allowPrivate);
  if (literal !== undefined) return literal;
  const host = hostOf(url);
  let addresses: { address: string; family: number }[];
  try {
    addresses = await withinDeadline(lookup(host, { all: true }), signal);
  } catch (error) {
    if (signal?.aborted === true) return { ok: false, reason: `cannot resolve ${host}: no answer in time` };
    return { ok: false, reason: `cannot resolve ${host}: ${(error as Error).message}` };
  }
  const usable = allowPrivate ? addresses : addresses.filter((a) => isPublicAddress(a.address));
  const first = usable[0];
  if (first === undefined) {
    return {
      ok: false,
      reason: `${host} resolves to a non-public address (${addresses.map((a) => a.address).join(', ')}); set WEBHOOK_ALLOW_PRIVATE_TARGETS=true to allow it`,
    };
  }
  return { ok: true, address: first.address, family: first.family === 6 ? 6 : 4 };
}
