// Pi fidelity driver for `@mariozechner/pi-coding-agent` 0.13.2, which checks `pi/v0.14`:
// 0.13.2 runs the compaction of 0.13.0–0.14.2 (the pi crate's docs compare the sources), in
// `dist/compaction.js`, `dist/session-manager.js` and the TUI's `dist/tui/tui-renderer.js`.
//
// Trigger: `TuiRenderer.checkAutoCompaction`, which the TUI runs when an assistant message
// ends, called on a bare TuiRenderer (Object.create of its prototype) whose agent state holds
// the model and the package's own `loadSessionFromEntries(entries).messages`, with the
// package's `SettingsManager` over the install folder (no settings.json there: its defaults);
// `executeCompaction` (which would abort the agent and call the model) only records that it
// was asked to run.
// Selection: compaction.js `compact(entries, model, settings, apiKey, signal)`, the call
// `executeCompaction` makes: `firstKeptEntryIndex` and `tokensBefore` of the entry it returns.
// The model call is mocked by an aborted signal: pi-ai answers with an aborted reply before
// any request leaves the process, and `compact` finishes with an empty summary.
import { serve } from "../protocol.mjs";

const home = process.env.COMPACTBENCH_FIDELITY_HOME;
const dist = `${home}/node_modules/@mariozechner/pi-coding-agent/dist`;
const { compact } = await import(`${dist}/compaction.js`);
const { loadSessionFromEntries } = await import(`${dist}/session-manager.js`);
const { SettingsManager } = await import(`${dist}/settings-manager.js`);
const { TuiRenderer } = await import(`${dist}/tui/tui-renderer.js`);

const settingsManager = new SettingsManager(home);

await serve(async req => {
	const { entries } = req.session;
	const model = {
		id: req.model.name,
		name: req.model.name,
		provider: "compactbench",
		api: "openai-completions",
		// Never reached (the call is aborted first); a closed local port if it were.
		baseUrl: "http://127.0.0.1:9",
		contextWindow: req.model.context_window,
		maxTokens: req.model.max_output_tokens,
		input: ["text"],
		reasoning: false,
		cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
	};
	let fired = false;
	const tui = Object.create(TuiRenderer.prototype);
	Object.assign(tui, {
		settingsManager,
		agent: { state: { model, messages: loadSessionFromEntries(entries).messages } },
		executeCompaction: async () => {
			fired = true;
		},
	});
	await tui.checkAutoCompaction();
	const aborted = new AbortController();
	aborted.abort();
	const entry = await compact(entries, model, settingsManager.getCompactionSettings(), "compactbench", aborted.signal);
	process.stderr.write(`${req.id} compactions=${entries.filter(e => e.type === "compaction").length} fired=${fired} first=${entry.firstKeptEntryIndex} before=${entry.tokensBefore}\n`);
	return {
		compact: fired,
		first_kept: entry.firstKeptEntryIndex,
		kept: null,
		split_turn: null,
		tokens_before: entry.tokensBefore,
	};
});
