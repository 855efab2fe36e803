// A Vercel AI SDK agent (generateText on MockLanguageModelV2, no network) calling one tool
// that works and one that throws, its spans exported to OTEL_EXPORTER_OTLP_ENDPOINT by the
// OpenTelemetry JS OTLP/HTTP exporter (JSON, gzip). Run from the npm prefix it was
// installed into (tests/e2e/otel_producers.rs copies it there). Prints RUN_OK: <text>.
import fs from "node:fs";
import path from "node:path";
import { context } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { JsonTraceSerializer } from "@opentelemetry/otlp-transformer";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BatchSpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";
import { generateText, stepCountIs, tool } from "ai";
import { MockLanguageModelV2 } from "ai/test";
import { z } from "zod";

context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());

const inner = new OTLPTraceExporter({ compression: "gzip" });
const capture = process.env.SPYGLASS_OTLP_CAPTURE;
let exported = 0;
let previous = Promise.resolve();
// Keeps each request's JSON as the exporter serialises it, for the unit tests' fixtures.
// Requests go one after another: a flush otherwise sends every batch at once, and their
// arrival order (so the steps' numbering) would vary from run to run.
const exporter = {
  export(spans, done) {
    if (capture) {
      exported += 1;
      fs.mkdirSync(capture, { recursive: true });
      const name = `${String(exported).padStart(2, "0")}.json`;
      fs.writeFileSync(path.join(capture, name), JsonTraceSerializer.serializeRequest(spans));
    }
    previous = previous.then(
      () => new Promise((sent) => inner.export(spans, (result) => { done(result); sent(); })),
    );
  },
  shutdown: () => inner.shutdown(),
  forceFlush: () => inner.forceFlush(),
};

const provider = new TracerProvider({
  resource: resourceFromAttributes({ "service.name": "vercel-weather" }),
  // Small batches: the root span comes in a later request than its children.
  spanProcessors: [new BatchSpanProcessor({ exporter, maxExportBatchSize: 2 })],
});
const tracer = provider.getTracer("ai");

const replies = [
  {
    content: [
      { type: "tool-call", toolCallId: "call-weather", toolName: "weather", input: '{"city":"Oslo"}' },
    ],
    finishReason: "tool-calls",
    usage: { inputTokens: 10, outputTokens: 5, totalTokens: 15 },
  },
  {
    content: [
      { type: "tool-call", toolCallId: "call-explode", toolName: "explode", input: '{"why":"test"}' },
    ],
    finishReason: "tool-calls",
    usage: { inputTokens: 20, outputTokens: 6, totalTokens: 26 },
  },
  {
    content: [{ type: "text", text: "It is 21 C in Oslo." }],
    finishReason: "stop",
    usage: { inputTokens: 30, outputTokens: 7, totalTokens: 37 },
  },
];
let call = 0;
const model = new MockLanguageModelV2({
  modelId: "mock-weather",
  doGenerate: async () => ({ ...replies[Math.min(call++, replies.length - 1)], warnings: [] }),
});

const result = await generateText({
  model,
  prompt: "What is the weather in Oslo?",
  stopWhen: stepCountIs(5),
  tools: {
    weather: tool({
      description: "The weather in a city",
      inputSchema: z.object({ city: z.string() }),
      execute: async ({ city }) => ({ city, tempC: 21 }),
    }),
    explode: tool({
      description: "Always fails",
      inputSchema: z.object({ why: z.string() }),
      execute: async ({ why }) => {
        throw new Error(`the explode tool failed: ${why}`);
      },
    }),
  },
  experimental_telemetry: { isEnabled: true, functionId: "weather-agent", tracer },
});
console.log(`RUN_OK: ${result.text}`);
await provider.forceFlush();
await provider.shutdown();
