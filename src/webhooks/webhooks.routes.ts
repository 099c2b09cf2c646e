import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { principalOf } from '../http/auth.ts';
import type { WebhooksService } from './webhooks.service.ts';
import {
  createWebhookBody,
  createdWebhook,
  deliveryList,
  deliveryListQuery,
  deliveryParams,
  message,
  webhookList,
  webhookListQuery,
  webhookParams,
  webhookRecord,
} from './webhooks.schemas.ts';

const family = 'simple' as const;
const tags = ['webhooks'];
const access = 'webhooks' as const;

export function webhooksRoutes(webhooks: WebhooksService) {
  return async (fastify: FastifyInstance) => {
    const app = fastify.withTypeProvider<ZodTypeProvider>();

    app.post(
      '/api/v1/webhooks',
      {
        config: { access, family },
        schema: {
          operationId: 'createWebhook',
          tags,
          description:
            'Registers an endpoint for ingestion events of the collections this key may use. The answer holds the signing secret once. Deliveries follow the Standard Webhooks scheme (webhook-id, webhook-timestamp, webhook-signature).',
          body: createWebhookBody,
          response: { 201: createdWebhook },
        },
      },
      async (request, reply) => reply.code(201).send(await webhooks.create(principalOf(request), request.body)),
    );

    app.get(
      '/api/v1/webhooks',
      {
        config: { access, family },
        schema: {
          operationId: 'listWebhooks',
          tags,
          description: 'The endpoints this key sees, newest first, a page at a time (1,000 by default).',
          querystring: webhookListQuery,
          response: { 200: webhookList },
        },
      },
      async (request) => webhooks.list(principalOf(request), request.query.page, request.query.page_size),
    );

    app.get(
      '/api/v1/webhooks/:webhook_id',
      {
        config: { access, family },
        schema: { operationId: 'getWebhook', tags, params: webhookParams, response: { 200: webhookRecord } },
      },
      async (request) => webhooks.get(principalOf(request), request.params.webhook_id),
    );

    app.delete(
      '/api/v1/webhooks/:webhook_id',
      {
        config: { access, family },
        schema: { operationId: 'deleteWebhook', tags, params: webhookParams, response: { 200: message } },
      },
      async (request) => webhooks.remove(principalOf(request), request.params.webhook_id),
    );

    app.get(
      '/api/v1/webhooks/:webhook_id/deliveries',
      {
        config: { access, family },
        schema: {
          operationId: 'listWebhookDeliveries',
          tags,
          params: webhookParams,
          querystring: deliveryListQuery,
          response: { 200: deliveryList },
        },
      },
      async (request) =>
        webhooks.deliveries(
          principalOf(request),
          request.params.webhook_id,
          request.query.page,
          request.query.page_size,
        ),
    );

    app.post(
      '/api/v1/webhooks/:webhook_id/deliveries/:delivery_id/redeliver',
      {
        config: { access, family },
        schema: {
          operationId: 'redeliverWebhook',
          tags,
          description: 'Sends the delivery again soon, with the same webhook-id.',
          params: deliveryParams,
          response: { 202: message },
        },
      },
      async (request, reply) =>
        reply
          .code(202)
          .send(await webhooks.redeliver(principalOf(request), request.params.webhook_id, request.params.delivery_id)),
    );
  };
}
