/** Whether a database error, possibly wrapped by drizzle, carries this SQLSTATE. */
function hasCode(error: unknown, code: string): boolean {
  for (let e = error, depth = 0; e instanceof Error && depth < 4; e = e.cause, depth++) {
    if ((e as { code?: unknown }).code === code) return true;
  }
  return false;
}

/** Whether a database error (possibly wrapped by drizzle) is a unique-constraint violation. */
export const isUniqueViolation = (error: unknown): boolean => hasCode(error, '23505');

/** Whether a database error (possibly wrapped by drizzle) is a foreign-key violation: the parent row is gone. */
export const isForeignKeyViolation = (error: unknown): boolean => hasCode(error, '23503');

/** PostgreSQL broke a lock cycle by aborting this transaction: running it again is safe. */
export const isDeadlock = (error: unknown): boolean => hasCode(error, '40P01');

/** Runs a transaction, again (up to `attempts` times) when PostgreSQL aborted it to break a deadlock. */
export async function retryOnDeadlock<T>(run: () => Promise<T>, attempts = 3): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await run();
    } catch (error) {
      if (attempt >= attempts || !isDeadlock(error)) throw error;
    }
  }
}
