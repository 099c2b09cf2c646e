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
