import type { Logger } from 'pino';
import { listen, type Listener } from '../db/notifications.ts';
import { randomBase62 } from '../db/ids.ts';
import type { AuthCache } from './auth-cache.ts';
import { KEY_CHANGES_CHANNEL } from './keys.repository.ts';

const ACK_CHANNEL = `${KEY_CHANGES_CHANNEL}_ack`;
const LISTENER_NAME = 'ragport-key-changes';

/**
 * Key changes across the instances on one PostgreSQL server. Each change is announced on
 * KEY_CHANGES_CHANNEL in the transaction that makes it; every instance listening drops the key
 * from its cache and acknowledges on ACK_CHANNEL. The instance that made the change answers its
 * caller only once every listening instance (counted in pg_stat_activity) has acknowledged, or
 * after `ackTimeoutMs`: so a caller who learns of a revocation and turns to another instance is
 * refused there. An instance whose listener is down serves no key from memory (see AuthCache).
 */
export interface KeyChanges {
  readonly live: boolean;
  /** Call before writing key `keyId`; `acknowledged` resolves once every instance dropped it. */
  expect(keyId: string): { acknowledged(): Promise<void>; cancel(): void };
  close(): Promise<void>;
}

export interface KeyChangesOptions {
  url: string;
  cache: AuthCache;
  logger: Logger;
  ackTimeoutMs?: number;
}

interface Waiter {
  acks: Set<string>;
  wake: () => void;
}

export async function startKeyChanges(options: KeyChangesOptions): Promise<KeyChanges> {
  const instance = randomBase62(12);
  const ackTimeoutMs = options.ackTimeoutMs ?? 1_000;
  const waiting = new Map<string, Set<Waiter>>();
  // Messages can arrive while listen() is still connecting: reached through this holder.
  const connection: { listener?: Listener } = {};

  const onChange = (keyId: string) => {
    options.cache.invalidate(keyId);
    connection.listener
      ?.query('select pg_notify($1, $2)', [ACK_CHANNEL, `${keyId} ${instance}`])
      .catch((error: unknown) => options.logger.warn({ err: error }, 'API key change: acknowledgement failed'));
  };
  const onAck = (payload: string) => {
    const [keyId = '', from = ''] = payload.split(' ');
    for (const waiter of waiting.get(keyId) ?? []) {
      waiter.acks.add(from);
      waiter.wake();
    }
  };

  const connected = await listen({
    url: options.url,
    channels: [KEY_CHANGES_CHANNEL, ACK_CHANNEL],
    name: LISTENER_NAME,
    onMessage: (channel, payload) => (channel === ACK_CHANNEL ? onAck(payload) : onChange(payload)),
    onGap: () => options.cache.clear(),
    onError: (error) => options.logger.warn({ err: error }, 'API key change listener failed; reconnecting'),
  });
  connection.listener = connected;

  return {
    get live() {
      return connected.live;
    },
    expect(keyId) {
      const waiter: Waiter = { acks: new Set(), wake: () => undefined };
      const set = waiting.get(keyId) ?? new Set<Waiter>();
      waiting.set(keyId, set);
      set.add(waiter);
      const cancel = () => {
        set.delete(waiter);
        if (set.size === 0 && waiting.get(keyId) === set) waiting.delete(keyId);
      };
      return {
        cancel,
        async acknowledged() {
          const deadline = Date.now() + ackTimeoutMs;
          try {
            const [row] = await connected.query<{ n: number }>(
              'select count(*)::int as n from pg_stat_activity where datname = current_database() and application_name = $1',
              [LISTENER_NAME],
            );
            const instances = row?.n ?? 0;
            while (waiter.acks.size < instances && Date.now() < deadline) {
              await new Promise<void>((resolve) => {
                const timer = setTimeout(resolve, deadline - Date.now());
                waiter.wake = () => {
                  clearTimeout(timer);
                  resolve();
                };
              });
            }
            if (waiter.acks.size < instances) {
              options.logger.warn(
                { key_id: keyId, instances, acknowledged: waiter.acks.size },
                'API key change: not every instance acknowledged in time; the rest apply it when they hear it',
              );
            }
          } catch (error) {
            options.logger.warn({ err: error }, 'API key change: could not wait for the other instances');
          } finally {
            cancel();
          }
        },
      };
    },
    close: () => connected.close(),
  };
}
