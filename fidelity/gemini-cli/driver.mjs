// Gemini CLI (@google/gemini-cli-core) fidelity driver: one JSON case per stdin line, one answer
// per stdout line (protocol in fidelity/README.md).
//
// The session (written by crates/fidelity/src/originals/gemini_cli.rs) becomes a real
// `GeminiChat` history; `ChatCompressionService.compress` (what `GeminiClient.tryCompressChat`
// calls before every request) then runs on it, non-forced, as `processTurn` runs it. Only the
// model call (`BaseLlmClient.generateContent`) is mocked; the `Config` is a stub with the few
// getters these functions read (the real `getTruncateToolOutputThreshold`). The chat's and the
// UI telemetry's `lastPromptTokenCount` are the newest reply's `usageMetadata.promptTokenCount`,
// as `processStreamResponse` and `updateTelemetryTokenCount` leave them after a reply.
//
// The window: `tokenLimit(model)` (core/tokenLimits.js) is a fixed table (1 048 576 for every
// model the bench runs); our crate takes the case's window as `tokenLimit`. A module hook
// replaces that one table by the case's window, so every caller (the compression threshold,
// the high-fidelity decision, `getTruncateToolOutputThreshold`) sees the same window as ours.
import { createInterface } from 'node:readline';
import { register } from 'node:module';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

//
// A masked output's file name ends in a random suffix (`Math.random().toString(36)
// .substring(7)`, five or six characters mostly). The same hook puts our crate's suffix for the
// part there (`globalThis.fidelitySuffix(callId)`, from the exporter's `fileSuffixes`: glue),
// since masking keeps a snippet only where it saves tokens, and the name's length is in it.
const hook = `export async function load(url, context, next) {
  if (url.endsWith('/dist/src/core/tokenLimits.js')) {
    return { format: 'module', shortCircuit: true, source:
      'export const DEFAULT_TOKEN_LIMIT = 1048576; export const GEMMA_4_TOKEN_LIMIT = 256000;' +
      'export function tokenLimit(model) { return globalThis.fidelityWindow; }' };
  }
  if (url.endsWith('/dist/src/context/toolOutputMaskingService.js')) {
    const loaded = await next(url, context);
    const random = /Math\\.random\\(\\)\\s*\\.toString\\(36\\)\\s*\\.substring\\(7\\)/;
    const source = String(loaded.source);
    if (!random.test(source)) throw new Error('fidelity hook: the masked file suffix is not where 0.61.0 has it');
    return { ...loaded, source: source.replace(random, 'globalThis.fidelitySuffix(callId)') };
  }
  return next(url, context);
}`;
register('data:text/javascript,' + encodeURIComponent(hook));

// stdout carries the answers: the package's debug logging (`debugLogger.debug` is
// `console.debug`, e.g. when the stubbed `countTokens` fails over media and the count falls
// back to the local estimate, as it does offline) goes to stderr.
console.debug = console.log = (...args) => console.error(...args);

const tmp = mkdtempSync(join(tmpdir(), 'fidelity-gemini-cli-'));
// Telemetry code reads and writes ~/.gemini (installation id): keep it in a scratch home.
process.env.HOME = tmp;
// The project temp dir and session id are our crate's fixed ones (crate docs: deliberate), as a
// path relative to the scratch dir, so that pointer lines name the same files.
process.chdir(tmp);
process.on('exit', () => rmSync(tmp, { recursive: true, force: true }));
const home = process.env.COMPACTBENCH_FIDELITY_HOME;
const src = join(home, 'node_modules/@google/gemini-cli-core/dist/src');
const load = (p) => import(pathToFileURL(join(src, p)).href);
const { ChatCompressionService } = await load('context/chatCompressionService.js');
const { ToolExecutor } = await load('scheduler/tool-executor.js');
const { SHELL_TOOL_NAME } = await load('tools/tool-names.js');
const { ToolOutputMaskingService, DEFAULT_TOOL_PROTECTION_THRESHOLD, DEFAULT_MIN_PRUNABLE_TOKENS_THRESHOLD, DEFAULT_PROTECT_LATEST_TURN } =
  await load('context/toolOutputMaskingService.js');
const { GeminiChat } = await load('core/geminiChat.js');
const { CompressionStatus } = await load('core/turn.js');
const { Config, DEFAULT_TRUNCATE_TOOL_OUTPUT_THRESHOLD } = await load('config/config.js');
const { uiTelemetryService } = await load('telemetry/uiTelemetry.js');

const SUMMARY = '## Goal\nContinue the task.\n\n## Progress\nWork is under way.';

function stubConfig(model, settings) {
  let truncationId = 0;
  const reply = { candidates: [{ content: { role: 'model', parts: [{ text: SUMMARY }] } }] };
  const config = {
    model,
    truncateToolOutputThreshold: settings.truncateToolOutputThreshold ?? DEFAULT_TRUNCATE_TOOL_OUTPUT_THRESHOLD,
    getModel: () => model,
    getActiveModel: () => model,
    isContextManagementEnabled: () => false,
    getProjectRoot: () => tmp,
    getSessionId: () => 'compactbench',
    getHookSystem: () => undefined,
    // `model.compressionThreshold` unset and no experiment flag: `compress` uses its default.
    getCompressionThreshold: async () => settings.compressionThreshold,
    // `contextManagement.tools.outputMasking` at its defaults, no experiment flags.
    getToolOutputMaskingConfig: async () => ({
      protectionThresholdTokens: DEFAULT_TOOL_PROTECTION_THRESHOLD,
      minPrunableThresholdTokens: DEFAULT_MIN_PRUNABLE_TOKENS_THRESHOLD,
      protectLatestTurn: DEFAULT_PROTECT_LATEST_TURN,
    }),
    getNextCompressionTruncationId: () => ++truncationId,
    getTruncateToolOutputThreshold: Config.prototype.getTruncateToolOutputThreshold,
    storage: { getProjectTempDir: () => '~/.gemini/tmp/project' },
    getBaseLlmClient: () => ({ generateContent: async () => reply }),
    getContentGenerator: () => ({ countTokens: async () => { throw new Error('offline'); } }),
    getApprovedPlanPath: () => undefined,
    getIncludeDirectoryTree: () => false,
    getSessionMemory: () => '',
    getUsageStatisticsEnabled: () => false,
    getTelemetryEnabled: () => false,
    getExperiments: () => undefined,
    getContentGeneratorConfig: () => undefined,
    isInteractive: () => false,
  };
  config.config = config;
  return new Proxy(config, {
    get(target, key) {
      if (key in target || typeof key === 'symbol' || key === 'then') return target[key];
      throw new Error(`config stub lacks ${String(key)}`);
    },
  });
}

async function answer(c) {
  const { contents, pending, usage, systemInstruction, shellTools, fileSuffixes } = c.session;
  globalThis.fidelityWindow = c.model.context_window;
  const config = stubConfig(c.model.name, c.settings ?? {});
  // Native index i keeps id String(i); the part objects are kept by reference through the
  // curated, coalesced history, so kept parts lead back to their native index.
  const history = contents.slice(0, pending).map((content, i) => ({ id: String(i), content }));
  const where = new Map();
  const byCallId = new Map();
  contents.forEach((content, i) =>
    content.parts.forEach((p) => {
      where.set(p, i);
      const id = p.functionCall?.id ?? p.functionResponse?.id;
      if (id !== undefined) byCallId.set(`${p.functionCall ? 'c' : 'r'}:${id}`, i);
    }));
  const chat = new GeminiChat({ config, promptId: 'compactbench' }, systemInstruction, [], history);
  const last = usage.filter((u) => u.index < pending).at(-1);
  if (last?.usageMetadata.promptTokenCount !== undefined) {
    chat.lastPromptTokenCount = last.usageMetadata.promptTokenCount;
  }
  uiTelemetryService.setLastPromptTokenCount(chat.getLastPromptTokenCount());
  // The threshold check is the first thing after which `compress` reads the history's
  // entries (`truncateHistoryToBudget`): a read of an entry means the check passed.
  let passed = false;
  const getHistory = chat.getHistory.bind(chat);
  chat.getHistory = (curated) =>
    new Proxy(getHistory(curated), {
      get(target, key) {
        if (typeof key === 'string' && /^\d+$/.test(key)) passed = true;
        return target[key];
      },
    });
  const { newHistory, info } = await new ChatCompressionService().compress(chat, 'fidelity', false, c.model.name, config, false);

  // Diagnostics only (driver.log): what `compress` answered.
  console.error(JSON.stringify({ id: c.id, passed, status: CompressionStatus[info.compressionStatus], before: info.originalTokenCount, after: info.newTokenCount }));
  let kept = null;
  if (info.compressionStatus === CompressionStatus.COMPRESSED && newHistory) {
    // newHistory = [summary, ack, ...kept suffix of the curated history].
    const turns = chat.getHistoryTurns(true);
    const keptTurns = turns.slice(turns.length - (newHistory.length - 2));
    const set = new Set();
    for (const t of keptTurns) {
      set.add(Number(t.id));
      for (const p of t.content.parts ?? []) {
        const i = where.get(p) ??
          (p.functionCall ? byCallId.get(`c:${p.functionCall.id}`) : undefined) ??
          (p.functionResponse ? byCallId.get(`r:${p.functionResponse.id}`) : undefined);
        if (i === undefined) throw new Error('a kept part has no native index');
        set.add(i);
      }
    }
    for (let i = pending; i < contents.length; i++) set.add(i);
    kept = [...set].sort((a, b) => a - b);
  }
  // Then `tryMaskToolOutputs(getHistory())`: the service masks on the history as the
  // compression left it (the pending request is not in it yet). A masked part is a copy of the
  // function response: its call id leads back to the native index.
  const compressed = info.compressionStatus === CompressionStatus.COMPRESSED && newHistory;
  const before = compressed ? newHistory : getHistory(false);
  // The service previews a masked output the shell's way (`formatShellPreview`) only for its
  // own shell tool's name; the same glue as the truncation below gives that preview to the
  // tools the exporter names (`shellTools`). The preview is built from the response the
  // service has just saved at `filePath` (`JSON.stringify(response, null, 2)`), by the
  // service's own method, before the service weighs what masking saves.
  globalThis.fidelitySuffix = (callId) => fileSuffixes[byCallId.get(`r:${callId}`)];
  const service = new ToolOutputMaskingService();
  service.formatMaskedSnippet = function (params) {
    if (shellTools.includes(params.toolName)) {
      const response = JSON.parse(readFileSync(params.filePath, 'utf8'));
      params = { ...params, preview: this.formatShellPreview(response) };
    }
    return ToolOutputMaskingService.prototype.formatMaskedSnippet.call(this, params);
  };
  const masking = await service.mask(before, config);
  const rewritten = new Set();
  // The pending tool results entered the history at tool time, cut by
  // `ToolExecutor.truncateOutputIfNeeded` when the shell tool printed more than
  // `getTruncateToolOutputThreshold()` (from the window and the last prompt size). Our crate
  // makes that cut before the request; the package's own method is run on the same results,
  // under the shell tool's own name for the tools the exporter names (`shellTools`: glue).
  let truncated = 0;
  // The text each native entry holds after its rewrite, part by part (`rewritten_text`).
  const partText = (p) => p.text ?? (typeof p.functionResponse?.response?.output === 'string'
    ? p.functionResponse.response.output
    : p.functionResponse?.response?.error);
  const written = new Map();
  const write = (i, part, text) => {
    if (!written.has(i)) written.set(i, contents[i].parts.map(partText));
    written.get(i)[part] = text;
  };
  for (let i = pending; i < contents.length; i++) {
    for (const [j, p] of (contents[i].parts ?? []).entries()) {
      const fr = p.functionResponse;
      if (!fr || !shellTools.includes(fr.name)) continue;
      const content = fr.response?.output ?? fr.response?.error;
      if (typeof content !== 'string') continue;
      const call = { request: { name: SHELL_TOOL_NAME, callId: fr.id, prompt_id: 'compactbench' } };
      const executor = { config, context: { promptId: 'compactbench' } };
      const { truncatedContent } = await ToolExecutor.prototype.truncateOutputIfNeeded.call(executor, call, content);
      if (truncatedContent !== content) {
        rewritten.add(i);
        write(i, j, truncatedContent);
        truncated++;
      }
    }
  }
  if (masking.maskedCount > 0) {
    for (const [k, content] of masking.newHistory.entries()) {
      for (const [j, p] of (content.parts ?? []).entries()) {
        // The service replaces a masked part by a new object and leaves the others as they were.
        if (p === before[k].parts[j]) continue;
        const i = byCallId.get(`r:${p.functionResponse?.id}`);
        if (i === undefined) throw new Error('a masked part has no native index');
        rewritten.add(i);
        const at = contents[i].parts.findIndex((q) => q.functionResponse?.id === p.functionResponse.id);
        write(i, at, p.functionResponse.response.output);
      }
    }
  }
  return {
    id: c.id,
    compact: passed || masking.maskedCount > 0 || truncated > 0,
    first_kept: null,
    kept,
    split_turn: null,
    tokens_before: info.originalTokenCount,
    rewritten: [...rewritten].sort((a, b) => a - b),
    // Text parts and tool outputs, one per line, as `crates/fidelity/src/lib.rs` `rewrite_text`.
    rewritten_text: Object.fromEntries([...written].map(([i, texts]) => [i, texts.filter((t) => typeof t === 'string').join('\n')])),
    outcome: CompressionStatus[info.compressionStatus],
    error: null,
  };
}

const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of rl) {
  if (!line.trim()) continue;
  const c = JSON.parse(line);
  let out;
  try {
    out = await answer(c);
  } catch (e) {
    console.error(c.id, e?.stack ?? e);
    out = { id: c.id, error: String(e?.message ?? e) };
  }
  process.stdout.write(JSON.stringify(out) + '\n');
}
