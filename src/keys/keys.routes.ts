import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
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

export function keysRoutes(keys: KeysService) {
  return async (fastify: FastifyInstance) => {
    const app = fastify.withTypeProvider<ZodTypeProvider>();

    app.post(
      '/api/v1/keys',
      { config, schema: { operationId: 'createKey', tags, body: createKeyBody, response: { 201: createdKeyRecord } } },
      async (request, reply) => reply.code(201).send(await keys.create(request.body)),
    );

    app.get(
      '/api/v1/keys',
      { config, schema: { operationId: 'listKeys', tags, response: { 200: keyList } } },
      async () => ({
        keys: await keys.list(),
      }),
    );

    app.get(
      '/api/v1/keys/:id',
      { config, schema: { operationId: 'getKey', tags, params: keyIdParams, response: { 200: keyRecord } } },
      async (request) => keys.get(request.params.id),
    );

    app.patch(
      '/api/v1/keys/:id',
      {
        config,
        schema: {
          operationId: 'updateKey',
          tags,
          params: keyIdParams,
          body: updateKeyBody,
          response: { 200: keyRecord },
        },
      },
      async (request) => keys.update(request.params.id, request.body),
    );

    app.delete(
      '/api/v1/keys/:id',
      { config, schema: { operationId: 'deleteKey', tags, params: keyIdParams, response: { 200: messageResponse } } },
      async (request) => {
        await keys.revoke(request.params.id);
        return { message: 'API key revoked' };
      },
    );

    app.post(
      '/api/v1/keys/:id/rotate',
      { config, schema: { operationId: 'rotateKey', tags, params: keyIdParams, response: { 200: createdKeyRecord } } },
      async (request) => keys.rotate(request.params.id),
    );

    app.get(
      '/api/v1/keys/:id/usage',
      { config, schema: { operationId: 'getKeyUsage', tags, params: keyIdParams, response: { 200: keyUsage } } },
      async (request) => keys.usage(request.params.id),
    );
  };
}
