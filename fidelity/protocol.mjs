// The driver side of the protocol in fidelity/README.md, shared by the node and bun drivers:
// one case per line on stdin, one answer per line on stdout, in order.
import { createInterface } from "node:readline";

// Answers every case on stdin with `answer(case)` (sync or async). A throw becomes an answer
// with `error` set and every other field empty, so one bad case never stops the driver.
export async function serve(answer) {
	for await (const line of createInterface({ input: process.stdin })) {
		if (!line.trim()) continue;
		const req = JSON.parse(line);
		let out;
		try {
			out = { id: req.id, ...(await answer(req)), error: null };
		} catch (e) {
			out = { id: req.id, compact: false, first_kept: null, kept: null, split_turn: null, tokens_before: null, error: String(e?.stack ?? e) };
		}
		process.stdout.write(`${JSON.stringify(out)}\n`);
	}
}
