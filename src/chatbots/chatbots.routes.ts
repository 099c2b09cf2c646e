import type { FastifyInstance, FastifyReply } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { sendChatStream } from '../http/sse.reply.ts';
import { clientGone } from '../http/abort.ts';
import { principalOf } from '../http/auth.ts';
import type { ChatService } from './chat.service.ts';
import type { CompletionsService } from './completions.service.ts';
import {
  chatBody,
  chatbotCompletionRequest,
  chatbotCompletionResponse,
  chatbotList,
  chatbotParams,
  chatbotRecord,
  chatResponse,
  conversationDetail,
  conversationList,
  conversationListQuery,
  conversationParams,
  createChatbotBody,
  message,
  updateChatbotBody,
} from './chatbots.schemas.ts';
import type { ChatbotsService } from './chatbots.service.ts';

const family = 'simple' as const;
const tags = ['chatbots'];

export function chatbotsRoutes(chatbots: ChatbotsService, completions: CompletionsService, chat: ChatService) {
  return async (fastify: FastifyInstance) => {
    const app = fastify.withTypeProvider<ZodTypeProvider>();

    app.post(
      '/api/v1/chatbot/create',
      {
        config: { access: 'write', family },
        schema: { operationId: 'createChatbot', tags, body: createChatbotBody, response: { 201: chatbotRecord } },
      },
      async (request, reply) => reply.code(201).send(await chatbots.create(principalOf(request), request.body)),
    );

    app.get(
      '/api/v1/chatbot/list',
      {
        config: { access: 'read', family },
        schema: { operationId: 'listChatbots', tags, response: { 200: chatbotList } },
      },
      async (request) => ({ chatbots: await chatbots.list(principalOf(request)) }),
    );

    app.get(
      '/api/v1/chatbot/:chatbot_id',
      {
        config: { access: 'read', family },
        schema: { operationId: 'getChatbot', tags, params: chatbotParams, response: { 200: chatbotRecord } },
      },
      async (request) => chatbots.get(principalOf(request), request.params.chatbot_id),
    );

    app.put(
      '/api/v1/chatbot/:chatbot_id',
      {
        config: { access: 'write', family },
        schema: {
          operationId: 'updateChatbot',
          tags,
          description: 'Partial update: only the fields sent change.',
          params: chatbotParams,
          body: updateChatbotBody,
          response: { 200: chatbotRecord },
        },
      },
      async (request) => chatbots.update(principalOf(request), request.params.chatbot_id, request.body),
    );

    app.delete(
      '/api/v1/chatbot/:chatbot_id',
      {
        config: { access: 'delete', family },
        schema: { operationId: 'deleteChatbot', tags, params: chatbotParams, response: { 200: message } },
      },
      async (request) => {
        await chatbots.delete(principalOf(request), request.params.chatbot_id);
        return { message: 'Chatbot deleted' };
      },
    );

    app.get(
      '/api/v1/chatbot/:chatbot_id/conversations',
      {
        config: { access: 'read', family },
        schema: {
          operationId: 'listConversations',
          tags,
          params: chatbotParams,
          querystring: conversationListQuery,
          response: { 200: conversationList },
        },
      },
      async (request) =>
        chatbots.listConversations(
          principalOf(request),
          request.params.chatbot_id,
          request.query.page,
          request.query.page_size,
        ),
    );

    app.get(
      '/api/v1/chatbot/conversations/:conversation_id',
      {
        config: { access: 'read', family },
        schema: {
          operationId: 'getConversation',
          tags,
          params: conversationParams,
          response: { 200: conversationDetail },
        },
      },
      async (request) => chatbots.getConversation(principalOf(request), request.params.conversation_id),
    );

    app.post(
      '/api/v1/chatbot/external/:chatbot_id/chat/completions',
      {
        config: { access: 'chat', family: 'structured' },
        schema: {
          operationId: 'createChatbotCompletion',
          tags,
          description:
            "OpenAI chat-completions format: the chatbot's model, system prompt and retrieval over its collection; the request's `model` is ignored.",
          params: chatbotParams,
          body: chatbotCompletionRequest,
          response: { 200: chatbotCompletionResponse },
        },
      },
      async (request, typedReply) => {
        // Documented as a chat.completion; sent as serialised JSON or as a stream.
        const reply = typedReply as unknown as FastifyReply;
        const outcome = await completions.complete(
          principalOf(request),
          request.params.chatbot_id,
          request.body,
          clientGone(reply),
        );
        if (outcome.kind === 'stream') return sendChatStream(reply, outcome.stream, outcome.includeUsage);
        return reply.type('application/json; charset=utf-8').send(outcome.body);
      },
    );

    app.post(
      '/api/v1/chatbot/external/:chatbot_id/chat',
      {
        config: { access: 'chat', family },
        schema: {
          operationId: 'chatWithChatbot',
          tags,
          description:
            'Send one message; the conversation (new without conversation_id) keeps the history, of which the last memory_length messages go back to the model.',
          params: chatbotParams,
          body: chatBody,
          response: { 200: chatResponse },
        },
      },
      async (request, reply) =>
        chat.chat(principalOf(request), request.params.chatbot_id, request.body, clientGone(reply)),
    );
  };
}
