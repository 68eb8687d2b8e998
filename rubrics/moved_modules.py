"""Module paths that earlier docs showed users, kept working after the modules moved.

`import rubrics.calibration` (or `python -m rubrics.delivery.schema_gen`) finds the module at its new place and
warns once (DeprecationWarning) with the new name. The old name is the same module object as the new one, never a
second copy, so its classes stay the same classes. Installed by `import rubrics`; one line per moved path.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

MOVED = {
    "rubrics.calibration": "rubrics.delivery.pass_rates.estimators",
    "rubrics.delivery.intervals": "rubrics.delivery.pass_rates.intervals",
    "rubrics.judges.prompts": "rubrics.judges.prompt.prompts",
    # one generator writes every schema now, the delivery ones included
    "rubrics.delivery.schema_gen": "rubrics.schema_gen",
    # the trust lifecycle is one package, above the judges
    "rubrics.judge_eval": "rubrics.trust",
    "rubrics.judge_eval.cross_validation": "rubrics.trust.cross_validation",
    "rubrics.judge_eval.head_training": "rubrics.trust.head_training",
    "rubrics.judge_eval.labels": "rubrics.trust.labels",
    "rubrics.judge_eval.metrics": "rubrics.trust.metrics",
    "rubrics.judge_eval.rendering": "rubrics.trust.rendering",
    "rubrics.judge_eval.split": "rubrics.trust.split",
    "rubrics.judges.quality": "rubrics.trust.quality",
    "rubrics.view.judge_eval_export": "rubrics.trust.export",
    # the judges, regrouped: fitted files, backends, the verdict cache
    "rubrics.judges.fitted_file": "rubrics.judges.fitted.fitted_file",
    "rubrics.judges.calibration_file": "rubrics.judges.fitted.calibration_file",
    "rubrics.judges.verdict_head": "rubrics.judges.fitted.verdict_head",
    "rubrics.judges.logistic": "rubrics.judges.fitted.logistic",
    "rubrics.judges.judge_models": "rubrics.judges.fitted.judge_models",
    "rubrics.judges.embedded": "rubrics.judges.backends.embedded",
    "rubrics.judges.openai": "rubrics.judges.backends.openai",
    "rubrics.judges.openai_http": "rubrics.judges.backends.openai_http",
    "rubrics.judges.none": "rubrics.judges.backends.none",
    "rubrics.judges.verdict_cache": "rubrics.judges.cache.verdict_cache",
    "rubrics.judges.cached": "rubrics.judges.cache.cached",
}


class _MovedLoader(importlib.abc.Loader):
    def __init__(self, new_name: str) -> None:
        self.new_name = new_name

    def create_module(self, spec):
        return importlib.import_module(self.new_name)

    def exec_module(self, module) -> None:
        """The module already ran under its new name."""

    def get_code(self, fullname: str):
        # runpy (python -m OLD) runs the new module's code as __main__
        return importlib.util.find_spec(self.new_name).loader.get_code(self.new_name)


class _MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path=None, target=None):
        new_name = MOVED.get(fullname)
        if new_name is None:
            return None
        warnings.warn(f"{fullname} moved to {new_name}; import it from there", DeprecationWarning, stacklevel=2)
        origin = importlib.util.find_spec(new_name).origin   # python -m OLD runs with the new file's __file__
        return importlib.util.spec_from_loader(fullname, _MovedLoader(new_name), origin=origin)


def install() -> None:
    # first: a moved package's old name (rubrics.judge_eval) is the new package, whose folder the path finder would
    # otherwise search for the old name's submodules and load them a second time, as other modules
    if not any(isinstance(finder, _MovedFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _MovedFinder())
