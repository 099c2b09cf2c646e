import { z } from 'zod';

/** `{message}`: the body of every answer that only confirms (deleted, updated, queued). */
export const message = z.object({ message: z.string() });
