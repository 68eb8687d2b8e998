#!/usr/bin/env bash
# Grades one attempt's trajectory (argument 1) against rubric.yaml; prints the Result as JSON and
# exits 0 when the score is 1.0. Partial credit is in the printed score.
set -eu
here="$(cd "$(dirname "$0")" && pwd)"
rubric grade "$here/rubric.yaml" "$1" --judge openai --base-url "${JUDGE_URL:?set JUDGE_URL}" --format json \
  | python -c 'import json, sys; r = json.load(sys.stdin); r = r[0] if isinstance(r, list) else r; print(json.dumps(r)); sys.exit(0 if r["score"] >= 1.0 else 1)'
