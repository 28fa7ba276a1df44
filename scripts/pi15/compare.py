#!/usr/bin/env python3
"""How far compactd's planner agrees with the pinned pi's (1.6.0) on session files (issue 25's measure).

For each FILE and each keepRecentTokens (2000 and 20000, reserveTokens 16384) it runs
the pinned pi's own planner (scripts/pi15/oracle.mjs, after scripts/agents.sh install) and
`compactd plan`, and compares the plans field by field; prints a line per plan and the count of
plans that agree on every field.

    scripts/pi15/compare.py [--compactd target/release/compactd] FILE...
"""
import argparse, hashlib, json, os, subprocess, sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NODE = os.path.join(ROOT, "target/agents/bin/node22")
FIELDS = ["firstKeptEntryId", "isSplitTurn", "tokensBefore", "hasPreviousSummary",
          "messagesToSummarize", "turnPrefixMessages", "readFiles", "modifiedFiles",
          "firstKeptPathIndex", "conversationSha256", "turnPrefixConversationSha256"]


def sha(text):
    # As node hashes a string: UTF-8, a lone surrogate as U+FFFD.
    return hashlib.sha256(text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
                          .encode("utf-8")).hexdigest()


def oracle(path, keep):
    out = subprocess.run([NODE, os.path.join(ROOT, "scripts/pi15/oracle.mjs"), path, str(keep)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["plan"]


def compactd(binary, path, keep):
    run = subprocess.run([binary, "plan", "--keep-recent-tokens", str(keep), path],
                         capture_output=True, text=True)
    if run.returncode != 0:
        return {"error": run.stderr.strip()[:200]}
    plan = json.loads(run.stdout).get("plan")
    if not plan or not plan.get("messagesToSummarize") and not plan.get("turnPrefixMessages"):
        return None
    return {
        "firstKeptEntryId": plan["firstKeptEntryId"], "isSplitTurn": plan["isSplitTurn"],
        "tokensBefore": plan["tokensBefore"], "hasPreviousSummary": plan.get("previousSummary") is not None,
        "messagesToSummarize": plan["messagesToSummarize"], "turnPrefixMessages": plan["turnPrefixMessages"],
        "readFiles": sorted(plan.get("readFiles") or []) if isinstance(plan.get("readFiles"), list) else plan.get("readFiles"),
        "modifiedFiles": sorted(plan.get("modifiedFiles") or []) if isinstance(plan.get("modifiedFiles"), list) else plan.get("modifiedFiles"),
        "firstKeptPathIndex": plan["firstKeptPathIndex"],
        "conversationSha256": sha(plan.get("conversation", "")),
        "turnPrefixConversationSha256": sha(plan.get("turnPrefixConversation", "")),
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--compactd", default=os.path.join(ROOT, "target/release/compactd"))
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    agree = total = 0
    for path in args.files:
        for keep in (2000, 20000):
            want, got = oracle(path, keep), compactd(args.compactd, path, keep)
            total += 1
            if want is None or got is None or "error" in (got or {}):
                same = want is None and got is None
                detail = "" if same else f"pi: {'no plan' if want is None else 'a plan'}, compactd: {got}"
            else:
                differ = [f for f in FIELDS if f in ("readFiles", "modifiedFiles") and len(want[f]) != (got[f] if isinstance(got[f], int) else len(got[f])) or f not in ("readFiles", "modifiedFiles") and want[f] != got[f]]
                same = not differ
                detail = ", ".join(f"{f}: pi {want[f]!r} compactd {got[f]!r}" for f in differ)[:400]
            agree += same
            print(f"{'agree ' if same else 'DIFFER'} {os.path.basename(path)} k={keep} {detail}")
    print(f"{agree} of {total} plans agree with the pinned pi")
    return 0


if __name__ == "__main__":
    sys.exit(main())
