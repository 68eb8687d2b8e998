"""Pydantic models of a rubric file (the format that README.md, "A rubric", describes).

An item's check is kept as (key, raw config): check keys are open (entry points can add some), so the
item model cannot list them as fields. The config is validated against the check's own model when
the rubric is loaded (rubrics.rubric.validation) and again, cheaply, when it is compiled.
"""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from rubrics.checks.facts import MAX_FACTS, FactSpec
from rubrics.judges.methods import METHOD_CLASSES, METHOD_NAMES

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"   # no spaces or "::": ids appear in paths, CLI output and labels
Slug = Annotated[str, Field(pattern=ID_PATTERN, max_length=128)]
Threshold = Annotated[float, Field(gt=0.0, lt=1.0)]
MaxTokens = Annotated[StrictInt, Field(ge=1, le=8192)]
Samples = Annotated[StrictInt, Field(ge=1, le=16, description=(
    "Reasoned mode: rationales drawn (sampled, sharing the prompt) whose verdicts are averaged (self-consistency); "
    "1, the default, is one greedy rationale."))]
JudgeMethod = Literal[METHOD_NAMES]   # the method registry, rubrics/judges/methods/
JudgeMode = Literal["direct", "reasoned"]
DEFAULT_EVIDENCE = ("final_answer",)
Probability = Annotated[float, Field(ge=0.0, le=1.0)]
TAG_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:/+-]*$"   # e.g. axis:accuracy, theme:safety
Tag = Annotated[StrictStr, Field(pattern=TAG_PATTERN, max_length=128)]
MAX_TAGS = 32
MAX_PARTS = 8
PartText = Annotated[StrictStr, Field(min_length=1, max_length=4096)]


def _ordered(band: tuple[float, float]) -> tuple[float, float]:
    if band[0] > band[1]:
        raise ValueError(f"the band's low end {band[0]} is above its high end {band[1]}")
    return band


UncertainBand = Annotated[tuple[Probability, Probability], AfterValidator(_ordered), Field(
    description="[low, high], inclusive: a judge probability in this band marks the item uncertain (its verdict "
                "is close to a coin; the result's score_low and score_high let it fall either way). "
                "Default [0.35, 0.65].")]
Band = tuple[float, float]   # an uncertain band once resolved: inclusive [low, high] probabilities
DEFAULT_UNCERTAIN: Band = (0.35, 0.65)   # the band of an item whose rubric, options and item set none


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _member(text: str) -> str:
    from rubrics.judges.panel.members import parse_member

    parse_member(text)   # ValueError: the accepted forms
    return text


PanelMemberText = Annotated[StrictStr, Field(
    pattern=rf"^(embedded(:({'|'.join(METHOD_NAMES)}))?|openai:https?://\S+)$", max_length=2048,
    description="embedded, embedded:METHOD, or openai:URL:MODEL (an OpenAI-compatible server)."),
    AfterValidator(_member)]


class PanelSpec(_Strict):
    """A panel of judges whose verdicts are combined per item."""
    members: list[PanelMemberText] = Field(min_length=2, max_length=16)
    combine: Literal["mean_logit", "majority"] = Field(
        "mean_logit", description="mean_logit: the sigmoid of the members' mean logit; majority: the members' "
                                  "vote (the share voting met is the probability).")


class JudgeOptions(_Strict):
    """`judge:` of an item in mapping form; the short form `judge: TEXT` means JudgeOptions(text=TEXT)."""
    text: StrictStr = Field(min_length=1, description="What the judge decides (for a penalty: whether it occurred).")
    method: JudgeMethod | None = Field(None, description="; ".join(cls.description for cls in METHOD_CLASSES.values())
                                       + ".")
    mode: JudgeMode | None = Field(None, description="direct: answer at once; reasoned: think first, then answer.")
    max_tokens: MaxTokens | None = Field(None, description="Token budget of the reasoning in reasoned mode.")
    samples: Samples | None = None
    threshold: Threshold | None = Field(None, description="Probability above which the item counts as met.")
    uncertain: UncertainBand | None = None
    parts: list[PartText] | None = Field(None, min_length=2, max_length=MAX_PARTS, description=(
        "The criterion cut into the requirements it joins: each part is asked on its own (same evidence and "
        "options), and the item is met when every part is; its probability is the lowest part's."))
    facts: list[FactSpec] | None = Field(None, min_length=1, max_length=MAX_FACTS, description=(
        "What the item's being met depends on, found in its evidence without a model: a literal (EXP-221; "
        "case-insensitive, never inside a longer number), a number (48.2L, $3,125, or {number, tolerance}: any "
        "number in the evidence within the tolerance, read as the number check reads them), {text} for a literal "
        "that reads as a number, or {any: [...]} for alternatives. The item is met only when every fact is found "
        "and the judge says met (for a penalty: the penalty applies only then); a missing fact decides it unmet "
        "without asking the judge."))


class JudgeDefaults(_Strict):
    """Rubric-level `judge:` defaults for every judge item."""
    evidence: list[StrictStr] | None = Field(None, description="Selectors shown to the judge (default: final_answer).")
    method: JudgeMethod | None = None
    mode: JudgeMode | None = None
    max_tokens: MaxTokens | None = None
    samples: Samples | None = None
    threshold: Threshold | None = None
    uncertain: UncertainBand | None = None
    calibration: StrictStr | None = Field(
        None, min_length=1,
        description="A calibration file (`rubric judge-eval --fit-calibration --write`), relative to the rubric file: "
                    "the calibration of the judge that `rubric grade` (without --calibration) and score() "
                    "(without a judge) build. Refused when made for another model or prompt layout.")
    panel: PanelSpec | None = Field(
        None, description="Grade judge items with a panel: the judge `rubric grade` (without --judge) and score() "
                          "(without a judge) build.")
    head: StrictStr | None = Field(
        None, min_length=1,
        description="A verdict head file (`rubric judge-train`), relative to the rubric file: the head of the embedded "
                    "judge that `rubric grade` (without --head) and score() build, read by items of method head. "
                    "Refused when trained for another model or prompt layout.")


class JudgeExampleSpec(_Strict):
    """A labelled few-shot example shown to the judge."""
    evidence: StrictStr
    met: StrictBool


class ItemFields(_Strict):
    """The fields of an item other than its one check key."""
    id: Slug
    text: StrictStr | None = Field(None, description="Human-readable statement of the item.")
    points: StrictInt | None = Field(None, description="Criteria only: non-zero; negative for a penalty.")
    evidence: list[StrictStr] | None = Field(None, description="Judge items only: selectors shown to the judge.")
    threshold: Threshold | None = Field(None, description="Judge items only: probability needed for met.")
    examples: list[JudgeExampleSpec] | None = Field(None, description="Judge items only: few-shot examples.")
    tags: list[Tag] | None = Field(None, max_length=MAX_TAGS,
                                   description="Labels such as axis:accuracy; each result reports a score per tag "
                                               "over the criteria that carry it.")


JUDGE_ONLY_FIELDS = ("evidence", "threshold", "examples")


class RubricHeader(_Strict):
    """The rubric document with its items left unvalidated (they are validated one by one)."""
    version: Literal[1] = Field(description="Rubric DSL version; only 1 exists.")
    id: Slug
    task: StrictStr = Field(min_length=1, description="The task the agent was given.")
    reference: StrictStr | None = Field(None, description="Facts the judge may use; never shown to the agent.")
    judge: JudgeDefaults | None = None
    gates: list[Any] = Field(default_factory=list, description="Items that must all be met, else the score is 0.")
    criteria: list[Any] = Field(default_factory=list, description="Items with points.")


class Item(BaseModel):
    model_config = ConfigDict(frozen=True)
    id: str
    kind: Literal["gate", "criterion"]
    text: str | None = None
    points: int | None = None
    check: str                 # the check key: "judge", "email_sent", ...
    config: Any                # the raw mapping under the key (JudgeOptions for judge items)
    evidence: tuple[str, ...] | None = None
    threshold: float | None = None
    examples: tuple[JudgeExampleSpec, ...] = ()
    tags: tuple[str, ...] = ()

    @property
    def is_judge(self) -> bool:
        return self.check == "judge"

    @property
    def penalty(self) -> bool:
        return self.points is not None and self.points < 0

    @property
    def label(self) -> str:
        """The item's statement: its text, else the judge criterion."""
        if self.text:
            return self.text
        return self.config.text if isinstance(self.config, JudgeOptions) else ""


class Rubric(BaseModel):
    model_config = ConfigDict(frozen=True)
    version: int = 1
    id: str
    task: str
    reference: str | None = None
    judge: JudgeDefaults | None = None
    gates: tuple[Item, ...] = ()
    criteria: tuple[Item, ...] = ()
    source: str = Field("<rubric>", exclude=True)   # file path, or "<text>"/"<dict>"

    @property
    def items(self) -> tuple[Item, ...]:
        return self.gates + self.criteria

    @property
    def total(self) -> int:
        return sum(item.points for item in self.criteria if item.points and item.points > 0)
