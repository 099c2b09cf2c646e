export const scopes = ['read', 'write', 'delete', 'chat', 'embeddings', 'tools', 'webhooks', 'admin'] as const;
export type Scope = (typeof scopes)[number];

export const tiers = ['standard', 'premium', 'enterprise'] as const;
export type Tier = (typeof tiers)[number];

/** Requests allowed per window; null means unlimited. */
export interface WindowLimits {
  minute: number | null;
  hour: number | null;
  day: number | null;
}

export const tierLimits: Record<Exclude<Tier, 'enterprise'>, WindowLimits> = {
  standard: { minute: 60, hour: 1_000, day: 10_000 },
  premium: { minute: 300, hour: 5_000, day: 50_000 },
};

export interface Quota {
  requestsPerDay: number | null;
  tokensPerMonth: number | null;
}

/** The authenticated caller, as every route and service sees it. */
export interface Principal {
  keyId: string;
  scopes: readonly Scope[];
  tier: Tier;
  limits: WindowLimits;
  quota: Quota;
  /** Collection names the key may use; null means every collection. */
  collections: readonly string[] | null;
}

export const hasScope = (principal: Principal, scope: Scope): boolean =>
  principal.scopes.includes('admin') || principal.scopes.includes(scope);

export const canUseCollection = (principal: Principal, name: string): boolean =>
  principal.collections === null || principal.collections.includes(name);

/**
 * Whether keys restricted to `collections` (null: every collection) stay inside what `principal`
 * may use. A key restricted to collections manages only such keys, itself included: otherwise it
 * could lift its own restriction, or take the secret of a key without one. A key restricted to
 * none (`[]`) is inside no one's: it fitted inside every restricted admin's, so one tenant's
 * admin could rotate another tenant's chat key and keep its secret.
 */
export const coversCollections = (principal: Pick<Principal, 'collections'>, collections: readonly string[] | null) => {
  const own = principal.collections;
  return (
    own === null || (collections !== null && collections.length > 0 && collections.every((name) => own.includes(name)))
  );
};
