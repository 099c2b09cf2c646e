import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { principalOf } from '../http/auth.ts';
import type { KeysService } from './keys.service.ts';
import {
  createdKeyRecord,
  createKeyBody,
  keyIdParams,
  keyList,
  keyRecord,
  keyUsage,
  messageResponse,
  updateKeyBody,
} from './keys.schemas.ts';

const config = { access: 'admin', family: 'structured' } as const;
const tags = ['keys'];

// Key management must not lift a restriction to collections (docs/operations.md).
const restriction =
  ' A key restricted to collections sees and manages only keys restricted to some of its own collections; others are reported as missing.';

export function keysRoutes(keys: KeysService) {
  return async (fastify: FastifyInstance) => {
    const app = fastify.withTypeProvider<ZodTypeProvider>();

    app.post(
      '/api/v1/keys',
      {
        config,
        schema: {
          operationId: 'createKey',
          tags,
          description:
            'Creates a key; its secret is shown only in this answer. A key restricted to collections creates only keys restricted to some of them (403 otherwise).',
          body: createKeyBody,
          response: { 201: createdKeyRecord },
        },
      },
      async (request, reply) => reply.code(201).send(await keys.create(principalOf(request), request.body)),
    );

    app.get(
      '/api/v1/keys',
      {
        config,
        schema: {
          operationId: 'listKeys',
          tags,
          description: `Live keys, newest first.${restriction}`,
          response: { 200: keyList },
        },
      },
      async (request) => ({
        keys: await keys.list(principalOf(request)),
      }),
    );

    app.get(
      '/api/v1/keys/:id',
      { config, schema: { operationId: 'getKey', tags, params: keyIdParams, response: { 200: keyRecord } } },
      async (request) => keys.get(principalOf(request), request.params.id),
    );

    app.patch(
      '/api/v1/keys/:id',
      {
        config,
        schema: {
          operationId: 'updateKey',
          tags,
          description: `Changes any field but the secret. A key restricted to collections cannot widen a key beyond its own collections (403).${restriction}`,
          params: keyIdParams,
          body: updateKeyBody,
          response: { 200: keyRecord },
        },
      },
      async (request) => keys.update(principalOf(request), request.params.id, request.body),
    );

    app.delete(
      '/api/v1/keys/:id',
      { config, schema: { operationId: 'deleteKey', tags, params: keyIdParams, response: { 200: messageResponse } } },
      async (request) => {
        await keys.revoke(principalOf(request), request.params.id);
        return { message: 'API key revoked' };
      },
    );

    app.post(
      '/api/v1/keys/:id/rotate',
      { config, schema: { operationId: 'rotateKey', tags, params: keyIdParams, response: { 200: createdKeyRecord } } },
      async (request) => keys.rotate(principalOf(request), request.params.id),
    );

    app.get(
      '/api/v1/keys/:id/usage',
      { config, schema: { operationId: 'getKeyUsage', tags, params: keyIdParams, response: { 200: keyUsage } } },
      async (request) => keys.usage(principalOf(request), request.params.id),
    );
  };
}
