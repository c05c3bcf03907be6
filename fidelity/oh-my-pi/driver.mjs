// oh-my-pi fidelity driver. The release ships TypeScript for bun, so under node this file only
// re-runs itself under the bun installed beside the package.
//
// Functions called (@oh-my-pi/pi-agent-core 18.2.11): compaction/compaction.ts `shouldCompact`,
// `compactionContextTokens`, `calculateContextTokens`, `calculatePromptTokens`,
// `prepareCompaction` (its `findCutPoint`), compaction/transcript-tokens.ts
// `isTranscriptUsageAnchor`, tokenizer.ts `Tokenizer`. The coding agent 18.3.4 cannot be
// loaded (it needs 18.3.4 siblings the registry lacks), so its check is re-stated here as the
// same calls in the same order, without deciding anything itself:
// - a user message last: `runPrePromptCompactionIfNeeded(messages)` with the prompt pending:
//   `compactionContextTokens(getContextBreakdown(...).usedTokens, #estimateStoredContextTokens(pending))`
//   (session-maintenance.ts `#estimatePrePromptContextTokens`, session-stats.ts
//   `getContextBreakdown`: anchor = newest usage anchor → `calculatePromptTokens` + the local
//   count of later messages + the pending prompt; no anchor → system prompt + every message);
// - a tool result last: `maintainContextMidRun`: nothing after a failed reply, else
//   `compactionContextTokens(calculateContextTokens(lastAssistant.usage), #estimateStoredContextTokens())`.
// Selection: `prepareCompaction(branch, settings)` on the stored branch (a pending prompt is
// appended after the compaction, so it is not on the branch).
import { spawn } from "node:child_process";
import { serve } from "../protocol.mjs";

const home = process.env.COMPACTBENCH_FIDELITY_HOME;

if (typeof globalThis.Bun === "undefined") {
	const child = spawn(`${home}/node_modules/.bin/bun`, [new URL(import.meta.url).pathname, ...process.argv.slice(2)], {
		stdio: "inherit",
		env: { ...process.env, NODE_ENV: "production" },
	});
	child.on("exit", code => process.exit(code ?? 1));
} else {
	const core = `${home}/node_modules/@oh-my-pi/pi-agent-core/src`;
	const c = await import(`${core}/compaction/compaction.ts`);
	const { isTranscriptUsageAnchor } = await import(`${core}/compaction/transcript-tokens.ts`);
	const { Tokenizer } = await import(`${core}/tokenizer.ts`);

	const answer = req => {
		const { systemPrompt, entries } = req.session;
		const settings = { ...c.DEFAULT_COMPACTION_SETTINGS, ...req.settings };
		const window = req.model.context_window;
		const model = {
			id: req.model.name,
			name: req.model.name,
			provider: "compactbench",
			api: "openai-completions",
			contextWindow: window,
			maxTokens: req.model.max_output_tokens,
			input: ["text"],
		};
		// No catalog tokenizer family: the byte heuristic, as for every model we replay.
		const tokenizer = new Tokenizer(model);
		const floored = { excludeEncryptedReasoning: true };
		// computeNonMessageTokens: the system prompt parts (no tool schemas in our sessions).
		const nonMessage = tokenizer.countTokens(systemPrompt);
		const last = entries[entries.length - 1]?.message;
		let branch = entries;
		let contextTokens = 0;
		if (last?.role === "user") {
			branch = entries.slice(0, -1);
			const pending = [last];
			const active = branch.map(e => e.message);
			const pendingTokens = tokenizer.countMessages(pending);
			let anchor = -1;
			for (let i = active.length - 1; i >= 0; i--) {
				if (isTranscriptUsageAnchor(active[i])) {
					anchor = i;
					break;
				}
			}
			const used =
				anchor >= 0
					? c.calculatePromptTokens(active[anchor].usage) + tokenizer.countMessages(active.slice(anchor + 1)) + pendingTokens
					: nonMessage + tokenizer.countMessages(active) + pendingTokens;
			const stored = nonMessage + tokenizer.countMessages(active, floored) + tokenizer.countMessages(pending, floored);
			contextTokens = c.compactionContextTokens(used, stored);
		} else if (last?.role === "toolResult") {
			const active = entries.map(e => e.message);
			const reply = active.findLast(m => m.role === "assistant");
			if (!reply || reply.stopReason === "aborted" || reply.stopReason === "error") {
				contextTokens = -1;
			} else {
				const stored = nonMessage + tokenizer.countMessages(active, floored);
				contextTokens = c.compactionContextTokens(c.calculateContextTokens(reply.usage), stored);
			}
		} else {
			throw new Error(`no check before a request ending in ${last?.role}`);
		}
		const compact = contextTokens >= 0 && c.shouldCompact(contextTokens, window, settings);
		const prep = c.prepareCompaction(branch, settings, model, tokenizer);
		const first = prep ? branch.findIndex(e => e.id === prep.firstKeptEntryId) : null;
		return {
			compact,
			first_kept: first,
			kept: null,
			split_turn: prep ? prep.isSplitTurn : null,
			tokens_before: prep ? prep.tokensBefore : null,
		};
	};

	await serve(answer);
}
