import { createHash } from 'node:crypto';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance, FastifySchema, RouteOptions } from 'fastify';
import { jsonSchemaTransform } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { alwaysStructured, errorCodes, type ErrorFamily } from './errors.ts';
import type { RouteEntry } from './route-config.ts';

const codeNames = Object.keys(errorCodes) as [keyof typeof errorCodes, ...(keyof typeof errorCodes)[]];

export const structuredErrorSchema = z
  .object({
    error: z.object({
      message: z.string(),
      type: z.string(),
      code: z.enum(codeNames),
      param: z.string().optional(),
    }),
  })
  .describe('Structured error');

export const simpleErrorSchema = z.object({ error: z.string() }).catchall(z.string()).describe('Simple error');

const documentedStatuses = [...new Set(Object.values(errorCodes).map((c) => c.status))];

/** The error responses of a route, generated from the error enum so docs cannot drift from code. */
function errorResponses(family: ErrorFamily): Record<number, z.ZodType> {
  return Object.fromEntries(
    documentedStatuses.map((status) => [
      status,
      family === 'simple' && !alwaysStructured.has(status) ? simpleErrorSchema : structuredErrorSchema,
    ]),
  );
}

export const DOCS_PREFIX = '/api/v1/docs';
const OPENAPI_PATH = '/api/v1/openapi.json';

/**
 * Makes every /api route (/api/v1, and /api/v2/rerank for Cohere's v2 SDK) declare how it is
 * reached: a scope (or `public`), an operationId, and the error responses of its family. A route
 * that forgets its scope does not start.
 */
export function registerRouteRules(app: FastifyInstance, table: RouteEntry[]): void {
  app.addHook('onRoute', (route: RouteOptions) => {
    if (!route.url.startsWith('/api/')) return;
    route.config = { ...route.config };
    if (route.url.startsWith(DOCS_PREFIX) || route.url === OPENAPI_PATH) route.config.access = 'public';
    const access = route.config.access;
    if (access === undefined) throw new Error(`Route ${String(route.method)} ${route.url} declares no access scope`);
    if (access === 'public') return;
    const family = route.config.family ?? 'structured';
    const schema = route.schema ?? {};
    const operationId = (schema as { operationId?: string }).operationId;
    if (operationId === undefined)
      throw new Error(`Route ${String(route.method)} ${route.url} declares no operationId`);
    route.schema = {
      ...schema,
      security: [{ bearerAuth: [] }],
      response: { ...errorResponses(family), ...(schema.response as object | undefined) },
    };
    for (const method of [route.method].flat()) {
      if (method === 'HEAD') continue;
      table.push({ method, url: route.url, access, family, operationId });
    }
  });
}

/**
 * A wildcard route (`/api/v1/models/*`, for ids with slashes) documented with a named path
 * parameter (`/api/v1/models/{model}`) rather than one called `*`.
 */
function wildcardNamed<T extends { url: string; schema: FastifySchema }>(output: T, name?: string): T {
  if (name === undefined || !output.url.endsWith('/*')) return output;
  const params = output.schema.params as { properties?: Record<string, unknown>; required?: string[] } | undefined;
  const { '*': wildcard, ...others } = params?.properties ?? {};
  return {
    ...output,
    url: `${output.url.slice(0, -1)}:${name}`,
    schema: {
      ...output.schema,
      params: { ...params, properties: { ...others, [name]: wildcard }, required: [name] },
    },
  };
}

/** A route's 200 streamed as a file: binary content of the given types, with a description. */
function withDocumentedResponse<T extends { schema: FastifySchema }>(
  output: T,
  documented?: Record<string, string>,
): T {
  if (documented === undefined) return output;
  const content = Object.fromEntries(
    Object.keys(documented).map((type) => [type, { schema: { type: 'string', format: 'binary' } }]),
  );
  const description = Object.values(documented).join(' ');
  const response = { ...(output.schema.response as object | undefined), 200: { description, content } };
  return { ...output, schema: { ...output.schema, response } };
}

/** OpenAPI from the zod schemas, and Swagger UI from the npm package's own assets: no CDN. */
export async function registerDocs(app: FastifyInstance, version: string): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.0.3',
      info: {
        title: 'ragport API',
        version,
        description: 'Retrieval, chat and embeddings. Authenticate with `Authorization: Bearer <API key>`.',
      },
      components: { securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer' } } },
    },
    transform: (input) => {
      const transformed = wildcardNamed(jsonSchemaTransform(input), input.route.config?.wildcardParam);
      const output = withDocumentedResponse(transformed, input.route.config?.documentedResponse);
      const documented = input.route.config?.documentedBody;
      if (documented === undefined) return output;
      const content = Object.fromEntries(
        Object.entries(documented).map(([type, schema]) => [
          type,
          { schema: z.toJSONSchema(schema, { target: 'openapi-3.0', io: 'input', unrepresentable: 'any' }) },
        ]),
      );
      return { ...output, schema: { ...output.schema, body: { content } } };
    },
  });
  await app.register(swaggerUi, {
    routePrefix: DOCS_PREFIX,
    uiConfig: { validatorUrl: null, url: OPENAPI_PATH, deepLinking: true },
    staticCSP: true,
  });
  app.get(OPENAPI_PATH, { config: { access: 'public' }, schema: { hide: true } }, async (request, reply) => {
    const { body, etag } = openapiDocument(app);
    reply.header('etag', etag).header('cache-control', 'no-cache');
    if (request.headers['if-none-match'] === etag) return reply.code(304).send();
    return reply.type('application/json; charset=utf-8').send(body);
  });
}

const builtDocuments = new WeakMap<FastifyInstance, { body: Buffer; etag: string }>();

/**
 * The OpenAPI document as served, built and serialised once: it is fixed once the routes are
 * registered, and serialising its 340 kB held the event loop ~5 ms per request (building it, the
 * first time, ~100 ms: the server does that before it listens).
 */
export function openapiDocument(app: FastifyInstance): { body: Buffer; etag: string } {
  let document = builtDocuments.get(app);
  if (document === undefined) {
    const body = Buffer.from(JSON.stringify(app.swagger()));
    document = { body, etag: `"${createHash('sha256').update(body).digest('base64url')}"` };
    builtDocuments.set(app, document);
  }
  return document;
}
