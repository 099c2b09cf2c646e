import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { principalOf } from '../http/auth.ts';
import type { CollectionsService } from './collections.service.ts';
import {
  collectionList,
  collectionParams,
  collectionRecord,
  createCollectionBody,
  message,
  updateCollectionBody,
} from './collections.schemas.ts';

const family = 'simple' as const;
const tags = ['collections'];

export function collectionsRoutes(collections: CollectionsService) {
  return async (fastify: FastifyInstance) => {
    const app = fastify.withTypeProvider<ZodTypeProvider>();

    app.post(
      '/api/v1/rag/collections',
      {
        config: { access: 'write', family },
        schema: {
          operationId: 'createCollection',
          tags,
          body: createCollectionBody,
          response: { 201: collectionRecord },
        },
      },
      async (request, reply) => reply.code(201).send(await collections.create(principalOf(request), request.body)),
    );

    app.get(
      '/api/v1/rag/collections',
      {
        config: { access: 'read', family },
        schema: { operationId: 'listCollections', tags, response: { 200: collectionList } },
      },
      async (request) => ({ collections: await collections.list(principalOf(request)) }),
    );

    app.get(
      '/api/v1/rag/collections/:collection_name',
      {
        config: { access: 'read', family },
        schema: { operationId: 'getCollection', tags, params: collectionParams, response: { 200: collectionRecord } },
      },
      async (request) => collections.get(principalOf(request), request.params.collection_name),
    );

    app.put(
      '/api/v1/rag/collections/:collection_name',
      {
        config: { access: 'write', family },
        schema: {
          operationId: 'updateCollection',
          tags,
          params: collectionParams,
          body: updateCollectionBody,
          response: { 200: message },
        },
      },
      async (request) => {
        await collections.updateDescription(
          principalOf(request),
          request.params.collection_name,
          request.body.description,
        );
        return { message: 'Collection updated' };
      },
    );

    app.delete(
      '/api/v1/rag/collections/:collection_name',
      {
        config: { access: 'delete', family },
        schema: { operationId: 'deleteCollection', tags, params: collectionParams, response: { 200: message } },
      },
      async (request) => {
        await collections.delete(principalOf(request), request.params.collection_name);
        return { message: 'Collection deleted' };
      },
    );
  };
}
