import { once } from 'node:events';
import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { FastifyReply } from 'fastify';
import type { ChatCompletionChunk } from 'openai/resources/chat/completions';
import { shuttingDown } from './abort.ts';
import { toAppError } from './error-handler.ts';
import { renderError } from './errors.ts';

interface Usage {
  promptTokens: number;
  completionTokens: number;
}

/**
 * A started chat completion stream as this layer sends it (the gateway's, or a chatbot's built
 * on it): each event's JSON as the upstream sent it with its parse, and the usage once it ended.
 * A failure surfaces from the iteration as an AppError, already in the client's terms.
 */
export interface StreamedCompletion extends AsyncIterable<{ raw: string; chunk: ChatCompletionChunk }> {
  readonly usage: Usage | undefined;
}

const usageChunk = (last: ChatCompletionChunk, usage: Usage) =>
  JSON.stringify({
    id: last.id,
    object: 'chat.completion.chunk',
    created: last.created,
    model: last.model,
    choices: [],
    usage: {
      prompt_tokens: usage.promptTokens,
      completion_tokens: usage.completionTokens,
      total_tokens: usage.promptTokens + usage.completionTokens,
    },
  });

/**
 * Writes a started stream in the contract's SSE framing straight to the socket: one `data:`
 * event per chunk (the event's JSON as it came), errors in-band, always `[DONE]`.
 */
async function writeSse(
  res: ServerResponse,
  stream: StreamedCompletion,
  includeUsage: boolean,
  shutdown: AbortSignal,
): Promise<void> {
  let last: ChatCompletionChunk | undefined;
  let usageSent = false;
  // Synchronous while the socket keeps up: `write` says whether to wait, so there is no promise
  // per event unless the client pushes back.
  const drained = () => Promise.race([once(res, 'drain'), once(res, 'close')]);
  // Events that arrive together (one upstream read, or a backlog after a busy moment) leave in
  // one system call: the socket is corked at the first of them and uncorked once the microtasks
  // relaying them have run. With a thousand streams open, a write per event was most of the CPU.
  // The socket itself, not the response: the response lets go of it when it ends, and a socket
  // left corked would hold back whatever it carries next.
  const socket = res.socket;
  let corked = false;
  const uncork = () => {
    corked = false;
    socket?.uncork();
  };
  const write = (frame: string) => {
    if (res.destroyed) return false;
    if (!corked && socket !== null) {
      corked = true;
      socket.cork();
      process.nextTick(uncork);
    }
    return !res.write(frame);
  };
  try {
    for await (const { raw, chunk } of stream) {
      last = chunk;
      if (chunk.usage) {
        // We always ask upstreams for usage; a client that did not ask does not get that chunk.
        if (!includeUsage && (chunk.choices?.length ?? 0) === 0) continue;
        usageSent = includeUsage;
      }
      if (write(`data: ${raw}\n\n`)) await drained();
    }
    if (includeUsage && !usageSent && stream.usage !== undefined && last !== undefined) {
      if (write(`data: ${usageChunk(last, stream.usage)}\n\n`)) await drained();
    }
  } catch (error) {
    // A stream the shutdown deadline cut says so, rather than blaming the provider.
    const reported = shutdown.aborted ? shuttingDown() : toAppError(error);
    write(`data: ${JSON.stringify(renderError(reported, 'structured'))}\n\n`);
  }
  if (!res.destroyed) res.end('data: [DONE]\n\n');
}

/**
 * Answers with a started chat stream as `text/event-stream`. Every streamed chat completion
 * (the standard API and the chatbots) goes out through here, so they are framed alike.
 */
export async function sendChatStream(reply: FastifyReply, stream: StreamedCompletion, includeUsage: boolean) {
  // From here on the socket is ours: headers already set (request id, rate limits) go first.
  void reply.hijack();
  reply.raw.writeHead(200, {
    ...(reply.getHeaders() as OutgoingHttpHeaders),
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    'x-accel-buffering': 'no',
  });
  await writeSse(reply.raw, stream, includeUsage, reply.server.shutdownSignal);
  return reply;
}
