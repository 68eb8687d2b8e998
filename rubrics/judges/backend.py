"""JudgeBackend: the one base of the judges that score a method's prompts on one model (EmbeddedJudge, OpenAIJudge,
and any judge a user writes).

The base owns what every such judge must do alike, so that one model, method and file give one calibration, one
refusal and cache keys that say the same things:

- the method for items that name none: the one asked, else the backend's default for the model (a catalog model's
  own, rubrics/judges/fitted/judge_models.py), checked before any file the user named is read;
- the verdict head, for a backend that reads hidden states: the head file the user named, checked against the
  model, else the one shipped for a catalog model;
- the calibrations: the calibration file the user named, checked against the model, its methods' prompt layouts
  and the method asked, else the one shipped for a catalog model; `calibrations=` entries over either;
- shipped files refused for the model (fitted_file.load_shipped): an error under $RUBRICS_STRICT_FITTED_FILES (the
  tests), a ShippedFileWarning otherwise;
- identity() and the judge's name, `<kind>:<model>`;
- cache_keys() and comparison_keys(): the backend's shared part, then the method, its calibration (and head) and
  the item's threshold, then what the backend sends to score.

A backend supplies only how prompts are scored and where its model's identity comes from: `kind`,
model_identity(), model_label(), default_method(), check_method() where it cannot run every method, key_shared(),
key_sent(), comparison_sent(), and judge() (and compare()) themselves. Its __init__ sets what model_identity()
reads, then calls set_up(FitRequest(...)).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from rubrics.judges.comparison import COMPARISON_PROMPT_VERSION
from rubrics.judges.fitted.calibration_file import CalibrationFile, ModelIdentity, judge_calibrations
from rubrics.judges.fitted.judge_models import JUDGE_MODELS, JudgeModel, catalog_name_of, shipped_calibration, \
    shipped_head, warn_uncalibrated
from rubrics.judges.fitted.verdict_head import judge_head
from rubrics.judges.methods import Calibration, JudgeMethod, JudgeMethods
from rubrics.judges.protocol import ComparisonRequest, JudgeItem, JudgeRequest


@dataclass(frozen=True)
class FitRequest:
    """What the judge was asked to judge with; each left None leaves it to the model's own."""
    method: str | None = None     # for items that name none
    calibration: Any = None       # a calibration file: its path, its content as a dict, or a CalibrationFile
    calibrations: Mapping[str, Calibration] | None = None   # {method: Calibration} over the file's or the shipped
    head: Any = None              # a verdict head: its path or a VerdictHead; a HeadProbe (training)


@dataclass(frozen=True)
class Fits:
    """What the judge runs its methods with, for its model as far as it is known."""
    method: str
    head: Any
    calibration_file: CalibrationFile | None   # the file the user named (the shipped one is the model's own)
    calibrations: dict[str, Calibration]
    catalog_model: JudgeModel | None


@dataclass(frozen=True)
class KeyedRequest:
    """What one request's cache key says beyond the judge's shared part: the method that judges it, and what the
    backend sends to score it (the embedded judge's token ids, the OpenAI-compatible judge's request bodies)."""
    method: JudgeMethod
    sent: Mapping[str, Any]


class JudgeBackend:
    """Base of a judge that scores a method's prompts on one model; see the module's docstring."""

    kind: ClassVar[str]                            # the name's prefix, and every cache key's "judge"
    reads_hidden_states: ClassVar[bool] = False    # can run the head method: looks for a head
    # Warn when the model has no calibration for the method. The embedded judge does: a local model's raw scores
    # mean nothing until fitted. A served model is usually one the catalog does not know (its choice score is a
    # probability already), so a warning there would be noise.
    warns_uncalibrated: ClassVar[bool] = False

    model: str | None       # the model as the user named it (None: the backend's default, or not yet known)
    name: str
    method: str
    head: Any
    calibration_file: CalibrationFile | None
    methods: JudgeMethods
    catalog_model: JudgeModel | None

    # -- what a backend supplies ---------------------------------------------------------------------------
    def model_identity(self) -> ModelIdentity | None:
        """The model's name, weights' sha256 and quantization; None while the backend does not know its model."""
        raise NotImplementedError

    def model_label(self) -> str:
        """The model as the judge's name shows it (after `<kind>:`)."""
        raise NotImplementedError

    def default_method(self, known: JudgeModel | None, head: Any) -> str:
        """The method for items that name none when none is asked. known: the catalog model's entry, if any."""
        raise NotImplementedError

    def check_method(self, name: str) -> None:
        """Refuse (ValueError) a method the backend cannot run; every registered one by default."""

    def key_shared(self) -> dict[str, Any] | None:
        """What every verdict of this judge depends on besides the method (the model's weights and numerics; the
        server and its model); None while no key can be made (a model not yet known)."""
        raise NotImplementedError

    def key_sent(self, requests: Sequence[JudgeRequest]) -> list[KeyedRequest | None]:
        """Per request: its method and what the backend sends to score it; None for one it cannot judge."""
        raise NotImplementedError

    def comparison_sent(self, requests: Sequence[ComparisonRequest]) -> list[dict[str, Any] | None]:
        """Per comparison: what the backend sends to score it; None for one it cannot judge."""
        raise NotImplementedError

    # -- set-up --------------------------------------------------------------------------------------------
    def set_up(self, asked: FitRequest) -> None:
        """Fit the judge to its model: called by the backend's __init__ once model_identity() can answer. Raises
        ValueError for a method it cannot run, CalibrationFileError or HeadFileError for a file the user named that
        does not fit, ShippedFileError for a refused shipped file under $RUBRICS_STRICT_FITTED_FILES."""
        self._asked = asked
        self._identity: ModelIdentity | None = None
        self._apply(self._fits())

    def refit(self) -> None:
        """Fit the judge again after its model became known (a server named the one model it serves). On an error
        the judge keeps what it had."""
        self.forget_identity()
        self._apply(self._fits())

    def identity(self) -> ModelIdentity | None:
        """The judge model's identity (remembered: an embedded model's weights are hashed once)."""
        if self._identity is None:
            self._identity = self.model_identity()
        return self._identity

    def forget_identity(self) -> None:
        """The model changed: its identity is asked again."""
        self._identity = None

    def method_for(self, item: JudgeItem) -> JudgeMethod:
        """The method that judges the item (ValueError for one the registry does not have)."""
        return self.methods.for_item(item, self.method)

    def _fits(self) -> Fits:
        asked, identity = self._asked, self.identity()
        catalog_name = catalog_name_of(identity) if identity is not None else None
        known = JUDGE_MODELS.get(catalog_name) if catalog_name else None
        head = self._head(identity, catalog_name)
        method = asked.method or self.default_method(known, head)
        # an unknown name, one the backend cannot run, or the head method without a head fails here, before a
        # calibration file is read or a model loaded
        self.check_method(method)
        JudgeMethods(head=head).named(method)
        shipped = self._shipped_calibration(identity, catalog_name) if asked.calibration is None else None
        self._warn_if_uncalibrated(identity, method, shipped)
        if asked.calibration is not None:
            calibration_file, calibrations = judge_calibrations(asked.calibration, asked.calibrations, identity,
                                                                asked.method)
        else:   # the shipped calibration is the model's own, not a file the user chose
            calibration_file = None
            calibrations = {**(shipped.calibrations if shipped else {}), **(asked.calibrations or {})}
        return Fits(method, head, calibration_file, calibrations, known)

    def _apply(self, fits: Fits) -> None:
        self.method, self.head, self.calibration_file = fits.method, fits.head, fits.calibration_file
        self.catalog_model = fits.catalog_model
        self.methods = JudgeMethods(fits.calibrations, fits.head)
        self.name = f"{self.kind}:{self.model_label()}"
        if fits.calibration_file is not None:   # checked again, not read again, when the model becomes known
            self._asked = replace(self._asked, calibration=fits.calibration_file)

    def _head(self, identity: ModelIdentity | None, catalog_name: str | None) -> Any:
        """The head the user named (checked against the model), else the one shipped for a catalog model."""
        if not self.reads_hidden_states:
            return None
        if self._asked.head is not None or catalog_name is None or identity is None:
            return judge_head(self._asked.head, identity)
        return shipped_head(identity)

    @staticmethod
    def _shipped_calibration(identity: ModelIdentity | None, catalog_name: str | None) -> CalibrationFile | None:
        if identity is None or catalog_name is None:
            return None
        return shipped_calibration(identity)

    def _warn_if_uncalibrated(self, identity: ModelIdentity | None, method: str,
                              shipped: CalibrationFile | None) -> None:
        asked = self._asked
        if not self.warns_uncalibrated or identity is None or asked.calibration is not None or asked.calibrations:
            return
        if method == "head" or (shipped is not None and method in shipped.calibrations):
            return   # a head is fitted on labels already; a shipped entry is the model's own calibration
        warn_uncalibrated(self.model, identity, method if shipped is not None else None)

    # -- cache keys ----------------------------------------------------------------------------------------
    def cache_keys(self, requests: Sequence[JudgeRequest]) -> list[str | None]:
        """Each request's verdict-cache key: the judge's shared part (key_shared), the method, its calibration (and
        head), the threshold, and what the backend sends to score it (None: a request it cannot judge, or every
        request while no key can be made)."""
        from rubrics.judges.cache.verdict_cache import verdict_key

        shared = self._shared_key()
        if shared is None:
            return [None] * len(requests)
        return [None if keyed is None else verdict_key({**shared, **self.method_key(keyed.method, request.item),
                                                        **keyed.sent})
                for request, keyed in zip(requests, self.key_sent(requests))]

    def comparison_keys(self, requests: Sequence[ComparisonRequest]) -> list[str | None]:
        """Each comparison's verdict-cache key: the judge's shared part, the comparison prompt's version, and what
        the backend sends to score it (None: a pair it cannot judge, or every pair while no key can be made)."""
        from rubrics.judges.cache.verdict_cache import verdict_key

        shared = self._shared_key()
        if shared is None:
            return [None] * len(requests)
        return [None if sent is None else verdict_key({**shared, "comparison": COMPARISON_PROMPT_VERSION, **sent})
                for sent in self.comparison_sent(requests)]

    def _shared_key(self) -> dict[str, Any] | None:
        shared = self.key_shared()
        return None if shared is None else {"judge": self.kind, **shared}

    def method_key(self, method: JudgeMethod, item: JudgeItem) -> dict[str, Any]:
        """What a verdict depends on of its method: its name and calibration, the head's content for the head
        method (another head gives other verdicts from the same prompt), and the item's threshold."""
        return {"method": method.name, "calibration": [method.calibration.scale, method.calibration.offset],
                **({"head": self.head.digest} if method.name == "head" else {}),
                "threshold": item.threshold}
