#!/usr/bin/env bash
# Grades one attempt in /repo: exit 0 (reward 1) when the fail-to-pass tests now pass and the
# pass-to-pass tests still pass, exit 1 (reward 0) otherwise.
set -u
cd /repo
# Models learn to edit or delete tests when they can: always grade against the sealed copy.
rm -rf .grading && mkdir .grading && cp -r /sealed/tests .grading/tests
timeout 600 python -m pytest -q -p no:cacheprovider .grading/tests/test_fail_to_pass.py || { echo "reward=0 (fail-to-pass)"; exit 1; }
timeout 600 python -m pytest -q -p no:cacheprovider .grading/tests/test_pass_to_pass.py || { echo "reward=0 (pass-to-pass)"; exit 1; }
echo "reward=1"
exit 0
