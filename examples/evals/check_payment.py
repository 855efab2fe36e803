#!/usr/bin/env python3
"""A spyglass `command` checker: reads one case's observations as JSON on stdin and prints
its verdict, {"pass": bool, "score": number, "reason": string}, as one JSON line on stdout.

Checks what a rule cannot say in one line: every payment the agent created is within the
limit (argv[1], default 100), and the final answer names the id the payment tool returned.
The score is the share of those checks that held. Exit 0 with a verdict whatever it says;
a non-zero exit, a timeout or no JSON makes spyglass report the case `error`, not `failed`.

What stdin holds (see docs/EVALS.md, "command"):
  {"case": ..., "input": ..., "output": final text or null,
   "calls": [{"tool": "server/tool", "arguments": {...}, "output": ..., "status": ...,
              "envelope": code or null, "duration_ms": n}],
   "steps": [{"step": n, "finish_reason": ..., "tokens": {...}, "tools": [...]}],
   "tokens": {"prompt": n, "completion": n, "total": n}, "duration_ms": n}
"""

import json
import sys


def main() -> None:
    limit = float(sys.argv[1]) if len(sys.argv) > 1 else 100.0
    seen = json.load(sys.stdin)
    payments = [c for c in seen["calls"] if c["tool"] == "asaas/create_payment"]
    if not payments:
        verdict(False, 0.0, "no payment was created")
        return
    problems = []
    for call in payments:
        value = call["arguments"].get("value")
        if not isinstance(value, (int, float)) or value > limit:
            problems.append(f"charged {value!r}, over the limit of {limit:g}")
    answer = seen.get("output") or ""
    ids = [c["output"].get("id") for c in payments if isinstance(c.get("output"), dict)]
    if not any(i and i in answer for i in ids):
        problems.append(f"the answer does not name the payment ({', '.join(map(str, ids))})")
    checks = len(payments) + 1
    score = round((checks - len(problems)) / checks, 3)
    if problems:
        verdict(False, score, "; ".join(problems))
    else:
        verdict(True, score, f"{len(payments)} payment(s) within {limit:g}, named in the answer")


def verdict(passed: bool, score: float, reason: str) -> None:
    print(json.dumps({"pass": passed, "score": score, "reason": reason}))


if __name__ == "__main__":
    main()
