import type { Logger } from 'pino';
import type { CollectionsService } from '../collections/collections.service.ts';
import type { ChatbotsConfig } from '../config.ts';
import type { Db } from '../db/client.ts';
import type { GatewayService } from '../gateway/gateway.service.ts';
import type { ResolvedGatewayConfig } from '../gateway/providers/config.ts';
import type { RetrievalService } from '../retrieval/retrieval.service.ts';
import type { TokenQuota } from '../usage/quota.ts';
import { createChatService } from './chat.service.ts';
import { createChatbotsRepository } from './chatbots.repository.ts';
import { chatbotsRoutes } from './chatbots.routes.ts';
import { createChatbotsService } from './chatbots.service.ts';
import { knownContextWindow } from './context-windows.ts';
import { createConversationLocks } from './conversation-lock.ts';
import { createConversationsRepository } from './conversations.repository.ts';
import { createCompletionsService } from './completions.service.ts';
import { createSampling } from './sampling.ts';
import { createTurns } from './turn.ts';
import type { Clock } from '../clock.ts';

export interface ChatbotsDeps {
  db: Db;
  collections: CollectionsService;
  retrieval: RetrievalService;
  gateway: GatewayService;
  /** Tokens each key used this month, for the token quota. */
  quota: TokenQuota;
  /** Whether a provider serves a rerank model (a chatbot's `rag_rerank.model`). */
  rerankModelExists: (model: string) => Promise<boolean>;
  gatewayConfig: Pick<ResolvedGatewayConfig, 'aliases' | 'context_windows'>;
  config: ChatbotsConfig;
  logger: Logger;
  clock: Clock;
}

/** The chatbots domain wired: records, conversations, the two external endpoints, its routes. */
export function createChatbotsModule(deps: ChatbotsDeps) {
  const { db, gateway, gatewayConfig } = deps;
  const logger = deps.logger.child({ component: 'chatbots' });
  const repo = createChatbotsRepository(db);
  const conversations = createConversationsRepository(db);
  const chatbots = createChatbotsService({
    repo,
    conversations,
    collections: deps.collections,
    modelExists: async (model) => (await gateway.models()).some((m) => m.id === model),
    rerankModelExists: deps.rerankModelExists,
  });
  const windows = gatewayConfig.context_windows;
  const turns = createTurns({
    retrieval: deps.retrieval,
    quota: deps.quota,
    repo,
    contextWindow: (model) => {
      const target = gatewayConfig.aliases[model] ?? model;
      return (
        windows[model] ??
        windows[target] ??
        knownContextWindow(target) ??
        knownContextWindow(model) ??
        deps.config.defaultContextWindow
      );
    },
    logger,
  });
  const sampling = createSampling();
  const completions = createCompletionsService({ chatbots, turns, gateway, sampling });
  const chat = createChatService({
    chatbots,
    conversations,
    locks: createConversationLocks({ repo: conversations, logger }),
    turns,
    gateway,
    sampling,
    logger,
    clock: deps.clock,
  });
  return { service: chatbots, routes: chatbotsRoutes(chatbots, completions, chat) };
}
