import { isIP } from 'node:net';
import type { Principal } from '../keys/principal.ts';
import type { LimitWindow } from './ratelimit.ts';

/** Large enough never to bind, small enough for Redis' integer arithmetic. */
const UNBOUNDED = 2 ** 52;

/**
 * The windows a key's requests count against: its tier's three rate windows (unset ones are
 * unlimited and left out) and the daily request quota, which is always counted so usage can
 * report it even when no quota is set.
 */
export function windowsFor(principal: Principal): LimitWindow[] {
  const windows: LimitWindow[] = [];
  const { minute, hour, day } = principal.limits;
  if (minute !== null) windows.push({ name: 'minute', seconds: 60, limit: minute, kind: 'rate' });
  if (hour !== null) windows.push({ name: 'hour', seconds: 3_600, limit: hour, kind: 'rate' });
  if (day !== null) windows.push({ name: 'day', seconds: 86_400, limit: day, kind: 'rate' });
  windows.push({
    name: 'quota_day',
    seconds: 86_400,
    limit: principal.quota.requestsPerDay ?? UNBOUNDED,
    kind: 'quota',
  });
  return windows;
}

export const unauthenticatedWindows = (perMinute: number): LimitWindow[] => [
  { name: 'minute', seconds: 60, limit: perMinute, kind: 'rate' },
];

export const keySubject = (keyId: string): string => `key:${keyId}`;
export const addressSubject = (address: string): string => `ip:${address}`;

/** The 64-bit network of an IPv6 address (`2001:db8:1:2::/64`), from any of its spellings. */
function ipv6Network(address: string): string {
  const [head = '', tail] = address.split('::');
  const left = head === '' ? [] : head.split(':');
  const right = tail === undefined || tail === '' ? [] : tail.split(':');
  const groups =
    tail === undefined ? left : [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right];
  return `${groups
    .slice(0, 4)
    .map((g) => Number.parseInt(g, 16).toString(16))
    .join(':')}::/64`;
}

/**
 * Who an unauthenticated request is counted against: its address in one spelling, an IPv6
 * client by its /64 (one host holds a /64 or more, so each full address was a fresh budget of
 * key guesses), an IPv4-mapped address as the IPv4 one, without a port a proxy may have written
 * into X-Forwarded-For (`1.2.3.4:5678`, `[2001:db8::1]:443`).
 */
export function clientAddress(ip: string): string {
  let address = ip.trim().toLowerCase();
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(address);
  if (bracketed?.[1] !== undefined) address = bracketed[1];
  else if (/^\d+\.\d+\.\d+\.\d+:\d+$/.test(address)) address = address.slice(0, address.lastIndexOf(':'));
  address = address.replace(/%.*$/, ''); // a zone (fe80::1%eth0)
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(address);
  if (mapped?.[1] !== undefined) return mapped[1];
  if (isIP(address) === 6) return ipv6Network(address);
  return address;
}
