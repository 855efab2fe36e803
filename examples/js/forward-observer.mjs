// Forward an agent SDK's observer events (seed-001 shapes: agent.step.completed,
// agent.completed, agent.failed, agent.eval.completed) to a spyglass runtime, so the
// inspector shows agents that run in another process. Node 18+ (global fetch).
//
//   import { aiObservers } from '@gemstack/ai-sdk/observers'
//   aiObservers.subscribe(forwardTo(process.env.SPYGLASS_URL))
//
// Run directly, it sends one sample run:  SPYGLASS_URL=http://127.0.0.1:8000 node forward-observer.mjs

export function forwardTo(baseUrl, { apiKey = process.env.CODESPAR_API_KEY, flushMs = 200 } = {}) {
  const queue = [];
  let timer = null;
  const flush = async () => {
    timer = null;
    const batch = queue.splice(0);
    if (batch.length === 0) return;
    const headers = { 'content-type': 'application/json' };
    if (apiKey) headers.authorization = `Bearer ${apiKey}`;
    const res = await fetch(`${baseUrl}/v1/events`, { method: 'POST', headers, body: JSON.stringify(batch) });
    if (!res.ok) console.error(`spyglass refused the batch: ${res.status} ${await res.text()}`);
  };
  const observer = (event) => {
    queue.push(event); // events go as the SDK emits them: the runtime stamps seq and ts
    timer ??= setTimeout(flush, flushMs);
  };
  observer.flush = flush;
  return observer;
}

const isMain = import.meta.url === `file://${process.argv[1]}`;
if (isMain) {
  const base = process.env.SPYGLASS_URL ?? 'http://127.0.0.1:8000';
  const observer = forwardTo(base);
  const tokens = { prompt: 412, completion: 37, total: 449 };
  const step = {
    iteration: 0, model: 'gpt-4o-mini', tokens, finishReason: 'tool_calls',
    toolCalls: [{ id: 't1', name: 'lookup_order', args: { order: 'o_9' }, result: { status: 'shipped' }, duration: 118, needsApproval: false }],
  };
  const common = { agentName: 'SupportAgent', model: 'gpt-4o-mini', provider: 'openai', streaming: false, conversationId: 'conv_js_1' };
  observer({ kind: 'agent.step.completed', ...common, iteration: 0, step, tokens, duration: 840 });
  observer({
    kind: 'agent.completed', ...common, input: 'Where is my order?', output: 'It shipped yesterday.',
    steps: [step], tokens, duration: 1530, finishReason: 'stop', failoverAttempts: 0,
  });
  observer({
    kind: 'agent.eval.completed', suite: 'SupportAgent', case: 'order status', status: 'passed', pass: true,
    score: 1, tokens, cost: 0.0002, duration: 1530,
  });
  await observer.flush();
  console.log('forwarded 3 events to', base);
}
