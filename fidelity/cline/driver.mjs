// Cline SDK fidelity driver: `@cline/core` 0.0.86's own `createContextCompactionPrepareTurn`, the
// hook its agent runtime runs before every model request, with the package's defaults (agentic
// strategy, auto mode, 20,000 preserved tokens) and compaction enabled as the CLI enables it.
//
// Only the model call is mocked: the summarizer is the package's own handler (`createHandlerAsync`
// of `@cline/llms`, provider `openai-compatible`) pointed at a chat-completions server this driver
// runs on 127.0.0.1, which streams the fixed summary of `crates/fidelity/src/ours.rs`.
// - compact: `shouldCompact` of the hook's own "Context compaction diagnostics" log (the auto
//   trigger, before the strategy runs);
// - first_kept: the index of the first kept message of the hook's result (its tail is the input's
//   own message objects after the summary), or null when it compacted nothing (trigger off, or the
//   strategy found no cut);
// - tokens_before: the summary message's `metadata.tokensBefore`.
// The session is `{systemPrompt, messages, apiMessages, previousRequestInputTokens, tools}` as the
// exporter writes it (crates/fidelity/src/originals/cline.rs): `messages` as the CLI's runtime
// stores them, `apiMessages` as it sends them, and `tools` (a stand-in as long as the CLI's tool
// definitions in JSON, which is all the hook's estimate reads of them) go in as the runtime hands
// its tools over; `maxInputTokens` is the model info's input limit as the CLI fills it (null: none).
import { createServer } from "node:http";
import { serve } from "../protocol.mjs";

const home = process.env.COMPACTBENCH_FIDELITY_HOME;
const { createContextCompactionPrepareTurn } = await import(`${home}/node_modules/@cline/core/dist/index.js`);

const SUMMARY = "## Goal\nContinue the task.\n\n## Progress\nWork is under way.";

const server = createServer((req, res) => {
	req.resume();
	req.on("end", () => {
		res.writeHead(200, { "content-type": "text/event-stream" });
		const chunk = delta => `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 0, model: "m", choices: [{ index: 0, delta, finish_reason: null }] })}\n\n`;
		res.write(chunk({ role: "assistant", content: SUMMARY }));
		res.write(`data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 0, model: "m", choices: [{ index: 0, delta: {}, finish_reason: "stop" }], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } })}\n\n`);
		res.end("data: [DONE]\n\n");
	});
});
await new Promise(resolve => server.listen(0, "127.0.0.1", resolve));
const baseUrl = `http://127.0.0.1:${server.address().port}/v1`;

const answer = async req => {
	const { systemPrompt, messages, apiMessages, previousRequestInputTokens, tools, maxInputTokens } = req.session;
	let diagnostics = null;
	const logger = {
		debug: (message, data) => {
			if (message === "Context compaction diagnostics") diagnostics = data;
		},
		log: (message, data) => process.stderr.write(`${req.id} ${message} ${JSON.stringify(data)}\n`),
	};
	const prepareTurn = createContextCompactionPrepareTurn({
		providerId: "openai-compatible",
		modelId: req.model.name,
		apiKey: "compactbench",
		baseUrl,
		compaction: { enabled: true, ...req.settings },
		logger,
		sessionId: req.id,
	});
	const result = await prepareTurn({
		agentId: "a",
		conversationId: req.id,
		parentAgentId: null,
		iteration: 1,
		messages,
		apiMessages,
		abortSignal: new AbortController().signal,
		systemPrompt,
		tools: tools ?? [],
		model: { id: req.model.name, provider: "openai-compatible", info: { id: req.model.name, contextWindow: req.model.context_window, maxInputTokens: maxInputTokens ?? undefined, maxTokens: req.model.max_output_tokens } },
		previousRequestInputTokens: previousRequestInputTokens ?? undefined,
	});
	if (diagnostics === null) throw new Error("the hook logged no diagnostics");
	const kept = result?.messages ? messages.indexOf(result.messages[1]) : -1;
	if (result?.messages && (kept < 0 || result.messages[0]?.metadata?.kind !== "compaction_summary")) {
		throw new Error(`unexpected result shape: ${JSON.stringify(result.messages.map(m => m.metadata?.kind ?? m.role))}`);
	}
	process.stderr.write(`${req.id} request=${diagnostics.requestInputTokens} trigger=${diagnostics.requestTriggerTokens} compact=${diagnostics.shouldCompact} kept=${kept}\n`);
	return {
		compact: diagnostics.shouldCompact,
		first_kept: kept >= 0 ? kept : null,
		kept: null,
		split_turn: null,
		tokens_before: result?.messages ? result.messages[0].metadata.tokensBefore : null,
	};
};

await serve(answer);
server.close();
