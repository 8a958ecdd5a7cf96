#!/usr/bin/env python3
"""Reads `go test -json` on stdin, prints what `go test` would (each
package's verdict, and the whole output of every test that failed or was
skipped), and fails on any failed or skipped test: in CI a skip means a
tool the tests need was missing, which must not pass for green."""
import collections
import json
import sys

output = collections.defaultdict(list)
failed, skipped = [], []
for line in sys.stdin:
    try:
        e = json.loads(line)
    except ValueError:
        sys.stdout.write(line)  # a build error, say
        continue
    key = (e.get("Package", ""), e.get("Test"))
    action = e.get("Action")
    if action == "output":
        if key[1] is None:
            sys.stdout.write(e["Output"])
        else:
            output[key].append(e["Output"])
    elif action in ("fail", "skip") and key[1] is not None:
        sys.stdout.write("".join(output[key]))
        (failed if action == "fail" else skipped).append(" ".join(key))
    elif action == "fail":
        failed.append(key[0])
    if action in ("pass", "fail", "skip"):
        output.pop(key, None)
for name in skipped:
    print("SKIPPED:", name)
for name in failed:
    print("FAILED:", name)
if failed or skipped:
    print(f"{len(failed)} failed, {len(skipped)} skipped: CI passes with neither")
    sys.exit(1)
