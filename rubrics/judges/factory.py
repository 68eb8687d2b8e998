"""The one place a judge is built: `build_judge(JudgeSpec)`.

A JudgeSpec says which judge to build and with what; it is filled from a rubric's `judge:` section
(`JudgeSpec.from_rubric`: what score() and ascore() build without a judge), from command-line flags over that
section (`JudgeSpec.from_args`: `rubric grade`, `rubric judge-eval`), or from Python arguments (`JudgeSpec(...)`).

    embedded   the in-process engine judge (rubrics.judges.backends.embedded), the default
    openai     a model on an OpenAI-compatible server (rubrics.judges.backends.openai), at base_url
    panel      a PanelJudge of `members` (texts as rubrics.judges.panel.members reads them); every embedded member
               shares one embedded judge (model, calibration), so the panel's embedded members are one engine batch
    none       NoJudge: every judge item is reported as not evaluated

Importing this module imports no judge: each is imported when it is built, with a missing extra explained
(MissingExtraError says what to install).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

KINDS = ("embedded", "openai", "panel", "none")
DEFAULT_COMBINE = "mean_logit"


@dataclass(frozen=True)
class JudgeSpec:
    """What build_judge builds. model, method and quantization go to the embedded judge (model and method to the
    OpenAI-compatible one too); calibration (a calibration file: a path or a loaded CalibrationFile) to the
    embedded and OpenAI-compatible judges, and to a panel's embedded member; calibrations (per method, over the
    file's) and options (any other constructor keywords) to the embedded or OpenAI-compatible judge; cache (a
    VerdictCache) keeps the verdicts of the judge, of each member for a panel. Specs compare equal when they
    build the same judge, so a spec is the key of the judges built once per rubric setting."""
    kind: str = "embedded"
    model: str | None = None
    method: str | None = None
    quantization: str | None = None
    base_url: str | None = None
    calibration: Any = field(default=None, hash=False)
    calibrations: Mapping[str, Any] | None = field(default=None, hash=False)
    members: tuple[str, ...] = ()
    combine: str = DEFAULT_COMBINE
    cache: Any = field(default=None, hash=False)
    options: Mapping[str, Any] | None = field(default=None, hash=False)
    head: Any = field(default=None, hash=False)   # a verdict head (path or VerdictHead) for the embedded judge
    # members a rubric (or a dataset's rubric) named, not the caller: their servers get no API key unless they are
    # the server the user configured, or key_to_rubric_urls says so
    rubric_members: bool = False
    key_to_rubric_urls: bool = False

    @classmethod
    def from_rubric(cls, rubric: Any) -> JudgeSpec:
        """The judge a rubric's `judge:` section asks for: its panel when it has one, else the embedded judge;
        either with its `judge: {calibration: PATH}` (relative to the rubric file; loaded when the judge is
        built)."""
        from rubrics.judges.fitted.calibration_file import rubric_calibration_path, rubric_file_path

        panel = getattr(getattr(rubric, "judge", None), "panel", None)
        calibration = rubric_calibration_path(rubric)
        head = rubric_file_path(rubric, getattr(getattr(rubric, "judge", None), "head", None))
        if panel is None:
            return cls("embedded", calibration=calibration, head=head)
        return cls("panel", members=tuple(panel.members), combine=panel.combine, calibration=calibration, head=head,
                   rubric_members=True)

    @classmethod
    def from_args(cls, args: Any, rubric: Any = None) -> JudgeSpec:
        """The judge the flags of an argparse Namespace ask for, over the rubric's `judge:` section (rubric None:
        no section). A flag the command does not define counts as not given.

        kind: --judge, else the rubric's choice (a panel when it has one, else embedded); --panel-member without
        --judge is refused. members: --panel-member, else the rubric's; combine: --panel-combine, else the
        rubric's, else mean_logit. calibration: --calibration FILE, else the rubric's `judge: calibration`
        (relative to the rubric file), loaded now (the embedded judge's shipped one when neither names a file);
        none is loaded for --judge none. cache: the verdict cache (--cache PATH, else the default file) for a
        command with --no-cache, unless it is given. head: --head FILE, else the rubric's `judge: head` (relative to
        the rubric file). --model, --method, --quantization and --base-url as given.
        Raises ValueError (CalibrationFileError for a calibration file that cannot be read)."""
        from rubrics.judges.fitted.calibration_file import load_calibration_file

        def flag(name: str) -> Any:
            return getattr(args, name, None)

        defaults = cls.from_rubric(rubric) if rubric is not None else cls()
        if flag("judge"):
            kind = flag("judge")
        elif flag("panel_member"):
            raise ValueError("--panel-member needs --judge panel")
        else:
            kind = defaults.kind
        if kind == "none":
            return cls("none")
        path = flag("calibration") or defaults.calibration
        calibration = load_calibration_file(path) if path else None
        cache = None
        if hasattr(args, "no_cache") and not args.no_cache:
            from rubrics.judges.cache.verdict_cache import VerdictCache

            cache = VerdictCache(flag("cache"))
        return cls(kind, model=flag("model"), method=flag("method"), quantization=flag("quantization"),
                   base_url=flag("base_url"), calibration=calibration,
                   members=tuple(flag("panel_member") or defaults.members),
                   combine=flag("panel_combine") or defaults.combine, cache=cache,
                   head=flag("head") or defaults.head,
                   rubric_members=not flag("panel_member") and defaults.rubric_members,
                   key_to_rubric_urls=bool(flag("send_key_to_rubric_urls")))


def build_judge(spec: JudgeSpec) -> Any:
    """The judge of the spec. Raises MissingExtraError when the judge's optional dependencies are not installed,
    ValueError for a spec the judge refuses (a malformed base_url, an unknown panel member, a calibration file
    made for another model), OSError for a model that cannot be found."""
    if spec.kind == "none":
        from rubrics.judges.backends.none import NoJudge

        return NoJudge()
    if spec.kind == "panel":
        return _panel(spec)
    if spec.kind == "openai":
        judge = _openai(spec)
    elif spec.kind == "embedded":
        judge = _embedded(spec)
    else:
        raise ValueError(f"judge: expected one of {', '.join(KINDS)}, got {spec.kind!r}")
    return _cached(judge, spec.cache)


def _keywords(spec: JudgeSpec, *names: str) -> dict[str, Any]:
    """The constructor keywords of the spec's fields that are set (a calibration even when falsy)."""
    given = {name: getattr(spec, name) for name in names if getattr(spec, name)}
    for name in ("calibration", "calibrations", "head"):
        if getattr(spec, name) is not None:
            given[name] = getattr(spec, name)
    return {**given, **(spec.options or {})}


def _embedded(spec: JudgeSpec) -> Any:
    """The embedded engine judge: its engine options default to rubrics.judges.backends.embedded.engine_defaults (float32,
    the model in $RUBRICS_CACHE), its calibration to the model's shipped one."""
    from rubrics.judges.extras import explain_missing, import_judge_class, require_engine

    require_engine()
    cls = import_judge_class("backends.embedded", "EmbeddedJudge")
    try:
        return cls(**_keywords(spec, "model", "method", "quantization"))
    except ImportError as exc:
        explained = explain_missing(exc)
        if explained is not None:
            raise explained from exc
        raise


def _openai(spec: JudgeSpec) -> Any:
    """A model on an OpenAI-compatible server; it reads its API key from the environment."""
    from rubrics.judges.extras import import_judge_class

    cls = import_judge_class("backends.openai", "OpenAIJudge")
    return cls(base_url=spec.base_url, model=spec.model, **_keywords(spec, "method"))


def _panel(spec: JudgeSpec) -> Any:
    """The panel of the spec's members: the embedded ones share one embedded judge (spec.model and
    spec.calibration; no method: each member's method goes with the member), an OpenAI-compatible one is its
    server's model; spec.cache keeps every member's verdicts."""
    from rubrics.judges.panel.judge import PanelJudge, PanelMember
    from rubrics.judges.panel.members import parse_member

    parsed = [parse_member(text) for text in spec.members]   # ValueError: the accepted forms
    embedded = None
    members = []
    for member in parsed:
        if member.kind == "embedded":
            if embedded is None:
                embedded = build_judge(JudgeSpec("embedded", model=spec.model, calibration=spec.calibration,
                                                 cache=spec.cache, head=spec.head))
            members.append(PanelMember(embedded, member.method, label=member.text))
        else:
            options = None if _may_get_key(spec, member.base_url) else {"environment_key": False}
            judge = build_judge(JudgeSpec("openai", base_url=member.base_url, model=member.model, cache=spec.cache,
                                          options=options))
            members.append(PanelMember(judge, label=member.text))
    return PanelJudge(members, spec.combine)  # type: ignore[arg-type]


def _may_get_key(spec: JudgeSpec, url: str) -> bool:
    """Whether the server at url may receive the API key of the environment: a member the caller named, the server
    the user configured (--base-url, RUBRICS_OPENAI_BASE_URL or OPENAI_BASE_URL; same scheme, host and port), or
    any server when the user said so (--send-key-to-rubric-urls). A rubric is data someone else may have written:
    naming a server in it must not collect the user's key."""
    import os
    import warnings
    from urllib.parse import urlsplit

    if not spec.rubric_members or spec.key_to_rubric_urls:
        return True
    configured = [spec.base_url, os.environ.get("RUBRICS_OPENAI_BASE_URL"), os.environ.get("OPENAI_BASE_URL")]

    def origin(text: str) -> tuple[str, str | None, int | None]:
        parts = urlsplit(text.strip())
        return parts.scheme.lower(), parts.hostname, parts.port or {"http": 80, "https": 443}.get(parts.scheme)

    if any(origin(url) == origin(other) for other in configured if other):
        return True
    warnings.warn(f"panel member at {url}: named by the rubric, not by you, so no API key is sent to it (pass "
                  "--send-key-to-rubric-urls, or name the server with --base-url, to send one)", stacklevel=3)
    return False


def _cached(judge: Any, cache: Any) -> Any:
    if cache is None:
        return judge
    from rubrics.judges.cache.cached import CachedJudge

    return CachedJudge(judge, cache)
