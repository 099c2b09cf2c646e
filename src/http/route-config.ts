import type { ZodType } from 'zod';
import type { Principal, Scope } from '../keys/principal.ts';
import type { ErrorFamily } from './errors.ts';

/** `public` routes need no key; every other /api/v1 route names the one scope it requires. */
export type RouteAccess = Scope | 'public';

declare module 'fastify' {
  interface FastifyContextConfig {
    access?: RouteAccess;
    family?: ErrorFamily;
    /**
     * The request body by content type, for the OpenAPI document only: routes that read their
     * body themselves (multipart uploads) declare it here instead of as `schema.body`, which
     * fastify would validate.
     */
    documentedBody?: Record<string, ZodType>;
    /**
     * A 200 that is not JSON (a file streamed), by content type with its description, for the
     * OpenAPI document only.
     */
    documentedResponse?: Record<string, string>;
    /** A wildcard route's `*` as a named path parameter in the OpenAPI document. */
    wildcardParam?: string;
  }
  interface FastifyRequest {
    principal: Principal | null;
  }
}

export interface RouteEntry {
  method: string;
  url: string;
  access: RouteAccess;
  family: ErrorFamily;
  operationId: string | undefined;
}
