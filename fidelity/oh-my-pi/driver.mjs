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
//
// With the argument `turn-end`, the session ends with the run's final reply and the check is
// 18.3.4's `checkCompaction(reply)` (session-maintenance.ts), re-stated as the same calls of
// agent-core's compaction/pruning.ts and compaction.ts in the same order:
// - `#pruneStaleToolResults`: unless `supersedeReads` and `dropUseless` are both off,
//   `pruneSupersededToolResults(branch, tokenizer, {supersedeKey: readToolSupersedeKey (if
//   supersedeReads), pruneUseless: dropUseless, protectedTools: DEFAULT_PRUNE_CONFIG's,
//   keepBoundaryId, idleFlushMs: PRUNE_IDLE_FLUSH_MS (90 min)})`. Glue: `now` is the reply's
//   own timestamp (the check runs as the reply ends, so the idle gap is 0 and the idle flush
//   never fires, as the crate documents: no wall clock). `#withPlanProtection` adds a matcher
//   for reads of the `local://` plan file, which our sessions never read; it is left out.
// - `compaction.enabled` off: no compaction; a failed reply (`stopReason: "error"`) likewise.
// - `#pruneToolOutputs`: `pruneToolOutputs(branch, tokenizer, {...DEFAULT_PRUNE_CONFIG,
//   pruneUseless: dropUseless, keepBoundaryId, cacheWarmSuffixTokens:
//   PRUNE_CACHE_WARM_SUFFIX_TOKENS (8000; the model has no prefix-bound thinking)})`.
// - `shouldCompact(compactionContextTokens(calculateContextTokens(reply.usage),
//   #estimateStoredContextTokens()), window, settings)`, the stored estimate counted on the
//   pruned messages (the passes rewrite the branch's messages in place, and the agent's
//   messages are rebuilt from it). No compaction entry is ever exported, so `keepBoundaryId`
//   is undefined and the reply never predates a compaction.
// `rewritten`: the entries either pass stamped `prunedAt` on. `compact`: the check maintains
// context, i.e. the threshold fired or a pass rewrote history (as our crate's decision and the
// Gemini CLI driver read it). Selection: where the threshold fired, `prepareCompaction` on the
// pruned branch, which `runAutoCompaction` prepares.
// `supersedeReads` and `dropUseless` default to true (context-settings.ts
// `cfgCompactionSupersedeReads`, `cfgCompactionDropUseless`); a case's settings override them.
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
	const p = await import(`${core}/compaction/pruning.ts`);
	const turnEnd = process.argv[2] === "turn-end";
	// session-maintenance.ts `PRUNE_IDLE_FLUSH_MS`, `PRUNE_CACHE_WARM_SUFFIX_TOKENS`.
	const PRUNE_IDLE_FLUSH_MS = 90 * 60_000;
	const PRUNE_CACHE_WARM_SUFFIX_TOKENS = 8_000;

	// `checkCompaction(reply)` up to its threshold decision, and the selection on the pruned
	// branch (see the header).
	const turnEndAnswer = (req, settings, model, tokenizer, nonMessage) => {
		const { entries } = req.session;
		const reply = entries[entries.length - 1]?.message;
		if (reply?.role !== "assistant") throw new Error(`no check at a turn's end ending in ${reply?.role}`);
		const floored = { excludeEncryptedReasoning: true };
		const keepBoundaryId = undefined;
		let threshold = false;
		if (reply.stopReason !== "aborted") {
			if (settings.supersedeReads || settings.dropUseless) {
				p.pruneSupersededToolResults(entries, tokenizer, {
					supersedeKey: settings.supersedeReads ? p.readToolSupersedeKey : undefined,
					pruneUseless: settings.dropUseless,
					protectedTools: [...p.DEFAULT_PRUNE_CONFIG.protectedTools],
					keepBoundaryId,
					idleFlushMs: PRUNE_IDLE_FLUSH_MS,
					now: reply.timestamp,
				});
			}
			// `hasConfiguredCompactionMethod`: the default method order is not empty, and no
			// case sets one.
			if (settings.enabled && reply.stopReason !== "error") {
				p.pruneToolOutputs(entries, tokenizer, {
					...p.DEFAULT_PRUNE_CONFIG,
					pruneUseless: settings.dropUseless,
					keepBoundaryId,
					cacheWarmSuffixTokens: PRUNE_CACHE_WARM_SUFFIX_TOKENS,
				});
				const stored = nonMessage + tokenizer.countMessages(entries.map(e => e.message), floored);
				const contextTokens = c.compactionContextTokens(c.calculateContextTokens(reply.usage), stored);
				threshold = c.shouldCompact(contextTokens, req.model.context_window, settings);
			}
		}
		const rewritten = [];
		entries.forEach((e, i) => {
			if (e.message?.prunedAt !== undefined) rewritten.push(i);
		});
		// Only a threshold pass prepares a compaction (`runAutoCompaction`); a turn that only
		// pruned selects nothing.
		const prep = threshold ? c.prepareCompaction(entries, settings, model, tokenizer) : undefined;
		return {
			compact: threshold || rewritten.length > 0,
			first_kept: prep ? entries.findIndex(e => e.id === prep.firstKeptEntryId) : null,
			kept: null,
			split_turn: prep ? prep.isSplitTurn : null,
			tokens_before: prep ? prep.tokensBefore : null,
			rewritten,
		};
	};

	const answer = req => {
		const { systemPrompt, entries } = req.session;
		const settings = { ...c.DEFAULT_COMPACTION_SETTINGS, supersedeReads: true, dropUseless: true, ...req.settings };
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
		if (turnEnd) return turnEndAnswer(req, settings, model, tokenizer, nonMessage);
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
