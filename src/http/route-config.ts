import type { Principal, Scope } from '../keys/principal.ts';
import type { ErrorFamily } from './errors.ts';

/** `public` routes need no key; every other /api/v1 route names the one scope it requires. */
export type RouteAccess = Scope | 'public';

declare module 'fastify' {
  interface FastifyContextConfig {
    access?: RouteAccess;
    family?: ErrorFamily;
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
