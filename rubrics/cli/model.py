"""`rubric model pull`: fetch, verify and convert the embedded judge model now, instead of on first use.

Useful before going offline, in a Docker build step, or in CI caches: later `rubric grade` runs then start at once.
The model goes into the rubric cache ($RUBRICS_CACHE or ~/.cache/agent-rubrics), where the embedded judge looks.
"""
from __future__ import annotations

import sys


def register(subparsers) -> None:
    parser = subparsers.add_parser("model", help="manage the embedded judge model",
                                   description="Manage the embedded judge model (SmolLM2-135M-Instruct).")
    actions = parser.add_subparsers(dest="model_action", metavar="ACTION", required=True)
    pull = actions.add_parser("pull", help="fetch, verify (sha256) and convert the embedded model into the cache")
    pull.add_argument("--force", action="store_true", help="fetch again even when a verified copy is cached")
    pull.set_defaults(handler=run_pull)


def run_pull(args) -> int:
    from rubrics.judges.extras import explain_missing
    from rubrics.model_cache import rubrics_cache_dir

    try:
        from judge_engine.weights import pull_embedded_model

        path = pull_embedded_model(force=args.force, cache_dir=rubrics_cache_dir())
    except ImportError as exc:
        explained = explain_missing(exc)
        print(f"error: {explained or exc}", file=sys.stderr)
        return 1
    except (OSError, RuntimeError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"embedded judge model ready: {path}")
    return 0
