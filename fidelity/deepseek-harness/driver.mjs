// DeepSeek Harness fidelity driver: the published engine packages
// (`@deepseek-ai/dsh-compaction-basic`, `-tool-result-pruner`, `-token-meter` 0.1.0-rc.8, whose
// sources are those of deepseek-ai/deepseek-harness@b150a551 that our crate reads).
//
// The session arrives as the harness's own event log (`request/header`, `turn/*`, `step/*`,
// `user/message`, `assistant/message` with provider usage, `tool/result`), written by
// crates/fidelity/src/originals/deepseek_harness.rs, and is seeded into a detached
// `Session.create` (dsh-session), which validates every event through its surface fold.
//
// Trigger and selection: `BasicCompactionEngine.compactIfNeeded(agent, 'pressure')`, the call
// the engine's `agent/pre-step` listener makes, on an engine built with its defaults in a
// cordis context that holds the package's `TokenMeter` and `ToolResultPruner` (the CLI `code`
// preset loads the pruner with its defaults, 8192 / 4096 / 1024) and an `llm` service whose
// `resolveModelInfo` reports the case's window. Only the model call is mocked: `summarize`,
// the engine's one customization hook, returns the fixed summary every driver returns (as a
// template summarizer would); the compaction transaction around it runs as it ships (shrink
// rule, commit, re-measure, second attempt).
// - compact: the check decided to act: the pruner replaced a tool result, or a range went to
//   the summarizer (the listener swallows what fails after that, and a per-target
//   configuration error: a window whose retained budget is not below the threshold);
// - first_kept: the surface node right after the first landed checkpoint's range, as an index
//   into the exported events (a node the pruner replaced maps to the result it replaced);
// - tokens_before: `tokenMeter.measure(session).totalTokens` when that range was summarized.
import { serve } from "../protocol.mjs";

const home = process.env.COMPACTBENCH_FIDELITY_HOME;
const pkg = name => import(`${home}/node_modules/@deepseek-ai/${name}/lib/index.js`);
const { BasicCompactionEngine } = await pkg("dsh-compaction-basic");
const { ToolResultPruner } = await pkg("dsh-compaction-tool-result-pruner");
const { TokenMeter } = await pkg("dsh-token-meter");
const { Session } = await pkg("dsh-session");
const { Context } = await pkg("cordis");

// Same text as crates/fidelity/src/ours.rs FIXED_SUMMARY.
const SUMMARY = "## Goal\nContinue the task.\n\n## Progress\nWork is under way.";

const answer = async req => {
	const session = Session.create("case", req.session.events);
	const exported = req.session.events.length;
	const ctx = new Context();
	const meter = new TokenMeter(ctx, {});
	ctx.set("tokenMeter", meter);
	const pruner = new ToolResultPruner(ctx, {});
	let pruned = 0;
	const pruneSession = pruner.pruneSession.bind(pruner);
	pruner.pruneSession = s => {
		const result = pruneSession(s);
		pruned += result.pruned.length;
		return result;
	};
	ctx.set("toolResultPruner", pruner);
	ctx.provide("llm");
	ctx.set("llm", { resolveModelInfo: async () => ({ context: { contextWindow: req.model.context_window } }) });

	// The surface and pressure at each summary call, in order.
	const asked = [];
	class Probe extends BasicCompactionEngine {
		async summarize(input, agent) {
			asked.push({ nodes: [...agent.session.surface.nodes], tokens: this.ctx.tokenMeter.measure(agent.session).totalTokens });
			return { summary: [{ type: "text", text: SUMMARY }], provider: "compactbench", model: req.model.name, maxTokens: this.config.maxTokens };
		}
	}
	const engine = new Probe(ctx, {});
	let failed = null;
	try {
		await engine.compactIfNeeded({ session, options: {} }, "pressure", new AbortController().signal);
	} catch (e) {
		failed = e;
	}
	// The first checkpoint that landed now (the exported log may hold earlier ones): its
	// `user/message` replaced the range it summarized, from the surface the first summary call saw.
	const landed = session.events.find(e => e.seq >= exported && e.type === "user/message" && e.surfaceOp?.op === "replace");
	let first;
	if (landed !== undefined) {
		const nodes = asked[0].nodes;
		first = nodes[nodes.indexOf(landed.surfaceOp.end) + 1];
	}
	// A replacement event (the pruner's) stands for the exported event it replaced.
	while (first !== undefined && first >= exported) first = session.events[first].surfaceOp.start;
	// Thrown before the engine acted on anything: not a decision the listener would swallow.
	if (failed !== null && pruned === 0 && asked.length === 0 && failed.constructor?.name !== "TargetPressureConfigError") throw failed;
	process.stderr.write(`${req.id} pruned=${pruned} summaries=${asked.length} first=${first} failed=${failed?.message}\n`);
	return {
		compact: pruned > 0 || asked.length > 0,
		first_kept: first ?? null,
		kept: null,
		split_turn: null,
		tokens_before: landed === undefined ? null : asked[0].tokens,
	};
};

await serve(answer);
