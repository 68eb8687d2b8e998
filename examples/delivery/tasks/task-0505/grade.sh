#!/usr/bin/env bash
# Grades one attempt in /repo against the sealed hidden tests (read-only at $SEALED_TESTS): exit 0
# (reward 1) when the fail-to-pass tests now pass and the pass-to-pass tests still pass, exit 1
# otherwise. The JUnit XML written to $REPORT_DIR names each test's outcome.
set -u
cd /repo
sealed="${SEALED_TESTS:-/sealed/tests}"
# The sealed copy, never /repo/tests: models learn to edit tests when they can. No plugin autoload,
# no ini file (-c /dev/null) and no conftest.py from /repo: the attempt must not reconfigure the run.
# `python -I` keeps /repo off sys.path while pytest itself is found (a /repo/pytest.py or
# sitecustomize.py would otherwise run instead); -o pythonpath=/repo adds it once pytest is loaded.
export PYTEST_DISABLE_PLUGIN_AUTOLOAD=1
exec python -I -B -m pytest -q -p no:cacheprovider -c /dev/null --rootdir /repo --confcutdir "$sealed" \
  -o pythonpath=/repo --junitxml "${REPORT_DIR:-/tmp}/junit.xml" "$sealed"
