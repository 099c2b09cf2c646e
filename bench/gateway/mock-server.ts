import { startMockUpstream, type MockUpstream } from '../../test/support/mock-upstream.ts';

/**
 * The mock upstream in its own process, so that it never competes with the load generator's
 * event loop. The parent changes its latency and pacing between runs over IPC.
 */
const mock: MockUpstream = await startMockUpstream({
  record: false,
  models: ['mock-chat'],
  acceptors: Number(process.env.BENCH_MOCK_ACCEPTORS ?? 16),
});
process.on('message', (message: Partial<MockUpstream['options']>) => {
  Object.assign(mock.options, message);
  process.send?.({ ok: true });
});
process.on('disconnect', () => {
  void mock.close().then(() => process.exit(0));
});
process.send?.({ url: mock.url, port: mock.port });
