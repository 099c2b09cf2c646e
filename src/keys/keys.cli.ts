import { existsSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { loadConfig } from '../config.ts';
import { openDatabase } from '../db/client.ts';
import { createMemoryStore } from '../ratelimit/memory.store.ts';
import { createKeysRepository } from './keys.repository.ts';
import { createKeyFromFlags } from './keys.cli.flags.ts';
import { createKeysService, operator } from './keys.service.ts';

const usage = `Usage:
  npm run keys -- create --name NAME --scopes read,write[,...] [--tier standard|premium|enterprise]
                         [--collections a,b] [--expires-at 2027-01-01 | 2027-01-01T12:00:00Z]
                         [--requests-per-minute N --requests-per-hour N --requests-per-day N]
                         [--quota-requests-per-day N] [--quota-tokens-per-month N]
  npm run keys -- list
  npm run keys -- revoke KEY_ID
  npm run keys -- rotate KEY_ID

Uses DATABASE_URL, or the embedded database under DATA_DIR. The embedded database admits one
process at a time: while a server runs on DATA_DIR this command is refused (use the server's
/api/v1/keys with an admin key, or stop it first).`;

async function main(argv: string[]): Promise<number> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      name: { type: 'string' },
      scopes: { type: 'string' },
      tier: { type: 'string' },
      collections: { type: 'string' },
      'expires-at': { type: 'string' },
      'requests-per-minute': { type: 'string' },
      'requests-per-hour': { type: 'string' },
      'requests-per-day': { type: 'string' },
      'quota-requests-per-day': { type: 'string' },
      'quota-tokens-per-month': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const [command, id, ...extra] = positionals;
  if (values.help || command === undefined) {
    process.stdout.write(`${usage}\n`);
    return command === undefined && !values.help ? 2 : 0;
  }
  // Everything about the command line is checked before the database is opened (or created).
  const takesId = command === 'revoke' || command === 'rotate';
  if (!takesId && command !== 'create' && command !== 'list') {
    process.stderr.write(`Unknown command '${command}'\n${usage}\n`);
    return 2;
  }
  if (extra.length > 0 || (!takesId && id !== undefined)) {
    process.stderr.write(`Unexpected argument '${extra[0] ?? id}' for ${command}\n${usage}\n`);
    return 2;
  }
  if (takesId && id === undefined) throw new Error(`${command} needs a key id`);
  const toCreate = command === 'create' ? createKeyFromFlags(values) : undefined;

  const config = loadConfig();
  if (config.databaseUrl === undefined && command !== 'create' && !existsSync(path.join(config.dataDir, 'pg'))) {
    // Not a new empty database in the wrong place: the keys are wherever the server keeps them.
    throw new Error(
      `No ragport database under DATA_DIR (${path.resolve(config.dataDir)}): set DATA_DIR to the server's, or DATABASE_URL`,
    );
  }
  const database = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, poolSize: 2 });
  try {
    await database.migrate();
    const keys = createKeysService({
      repo: createKeysRepository(database.db),
      limiter: createMemoryStore(),
      clock: Date.now,
      adminKey: undefined,
    });
    const print = (value: unknown) => process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
    switch (command) {
      case 'create': {
        const created = await keys.create(operator, toCreate as NonNullable<typeof toCreate>);
        print(created);
        process.stderr.write('Store the key now: it is shown only once.\n');
        return 0;
      }
      case 'list':
        print({ keys: await keys.list(operator) });
        return 0;
      case 'revoke':
        await keys.revoke(operator, id as string);
        print({ message: 'API key revoked', id });
        return 0;
      case 'rotate':
        print(await keys.rotate(operator, id as string));
        return 0;
    }
  } finally {
    await database.close();
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  },
);
