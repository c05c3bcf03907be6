"""The driver side of the protocol in fidelity/README.md for the python drivers, the twin of
protocol.mjs: one case per line on stdin, one answer per line on stdout, in order.

A driver imports it from its parent folder (`sys.path` gets `fidelity/` first).
"""

import json
import sys
import traceback


def serve(answer):
    """Answers every case on stdin with `answer(case)`. An exception becomes an answer with
    `error` set and every other field empty (its traceback goes to stderr, the driver's log), so
    one bad case never stops the driver."""
    for line in sys.stdin:
        if not line.strip():
            continue
        case = json.loads(line)
        try:
            out = {**answer(case), "id": case["id"], "error": None}
        except Exception as err:  # the original threw: report it, keep serving
            traceback.print_exc(file=sys.stderr)
            out = {
                "id": case["id"],
                "compact": False,
                "first_kept": None,
                "kept": None,
                "split_turn": None,
                "tokens_before": None,
                "error": f"{type(err).__name__}: {err}",
            }
        print(json.dumps(out), flush=True)
