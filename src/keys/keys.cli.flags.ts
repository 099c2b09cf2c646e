import { createKeyBody, type CreateKeyBody } from './keys.schemas.ts';

const list = (value: string | undefined) =>
  value === undefined
    ? undefined
    : value
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean);
const int = (value: string | undefined) => (value === undefined ? undefined : Number(value));

type Flags = Record<string, string | boolean | undefined>;

/** A date alone (2027-01-01) is its first moment in UTC; anything else goes to the schema as given. */
const moment = (value: string | undefined) =>
  value !== undefined && /^\d{4}-\d{2}-\d{2}$/.test(value) ? `${value}T00:00:00Z` : value;

/** The flag a schema path came from: `rate_limits.requests_per_minute` is `--requests-per-minute`. */
const flagOf = (path: PropertyKey[]) => {
  const [first, second] = path.map(String);
  const name =
    first === 'rate_limits' && second !== undefined
      ? second
      : first === 'quota' && second !== undefined
        ? `quota_${second}`
        : path.map(String).join('.');
  return `--${name.replaceAll('_', '-')}`;
};
const str = (flags: Flags, name: string) => (typeof flags[name] === 'string' ? flags[name] : undefined);

/** Command-line flags mapped onto the same schema the HTTP API validates with. */
export function createKeyFromFlags(flags: Flags): CreateKeyBody {
  const rateLimits = {
    requests_per_minute: int(str(flags, 'requests-per-minute')),
    requests_per_hour: int(str(flags, 'requests-per-hour')),
    requests_per_day: int(str(flags, 'requests-per-day')),
  };
  const quota = {
    requests_per_day: int(str(flags, 'quota-requests-per-day')),
    tokens_per_month: int(str(flags, 'quota-tokens-per-month')),
  };
  const defined = (o: Record<string, number | undefined>) =>
    Object.values(o).some((v) => v !== undefined) ? o : undefined;
  const parsed = createKeyBody.safeParse({
    name: str(flags, 'name'),
    scopes: list(str(flags, 'scopes')),
    tier: str(flags, 'tier'),
    collections: list(str(flags, 'collections')),
    expires_at: moment(str(flags, 'expires-at')),
    rate_limits: defined(rateLimits),
    quota: defined(quota),
  });
  if (!parsed.success) {
    throw new Error(parsed.error.issues.map((i) => `${flagOf(i.path)}: ${i.message}`).join('\n'));
  }
  // Checked here, before the database is opened (or created), as the service would after.
  if (parsed.data.tier !== 'enterprise' && parsed.data.rate_limits !== undefined) {
    throw new Error(
      `--requests-per-minute, --requests-per-hour and --requests-per-day can only be set with --tier enterprise; the ${parsed.data.tier} tier has fixed limits`,
    );
  }
  return parsed.data;
}
