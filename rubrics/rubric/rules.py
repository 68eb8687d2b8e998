"""Rubric-wide rules beyond the schema: duplicate ids, no positive points, and the sign-mistake warning.

They read the raw data, not the validated items, so that a rubric with one broken item still gets
every other finding in the same lint run.
"""
from __future__ import annotations

import re
from typing import Any, Iterator

from rubrics.rubric.problems import ERROR, WARNING

# A penalty's text must describe the bad behaviour (the judge is asked whether it occurred). Text that
# describes the good behaviour under negative points, or a failure under positive points, is the sign
# mistake HealthBench-style rubric authors make most.
FAILURE_WORDS = re.compile(
    r"\b(fails? to|failed to|failing to|incorrect(ly)?|wrong(ly)?|hallucinat\w*|fabricat\w*|omits?|"
    r"misses|mistaken(ly)?|inaccurate(ly)?|penalt(y|ies)|penalize\w*|deduct\w*|neglects?( to)?)\b", re.I)
SUCCESS_WORDS = re.compile(
    r"\b(does not|doesn't|do not|don't|did not|didn't|never|avoids?|refrains? from|correctly|accurately|"
    r"properly|successfully|without (any )?(error|mistake)s?)\b", re.I)

Finding = tuple[tuple, str, str, str]   # (path, message, code, severity)


def rubric_rules(data: dict, items) -> Iterator[Finding]:
    yield from duplicate_ids(data)
    yield from positive_points(data)
    yield from sign_mistakes(data)
    yield from facts_suggestions(data)


def _raw_items(data: dict) -> Iterator[tuple[tuple, dict]]:
    for section in ("gates", "criteria"):
        raw_items = data.get(section)
        if isinstance(raw_items, list):
            for i, raw in enumerate(raw_items):
                if isinstance(raw, dict):
                    yield (section, i), raw


def duplicate_ids(data: dict) -> Iterator[Finding]:
    first_seen: dict[str, tuple] = {}
    for path, raw in _raw_items(data):
        item_id = raw.get("id")
        if not isinstance(item_id, str):
            continue
        if item_id in first_seen:
            earlier = first_seen[item_id]
            yield (path + ("id",), f"duplicate id '{item_id}' (first used at {earlier[0]}[{earlier[1]}])",
                   "duplicate-id", ERROR)
        else:
            first_seen[item_id] = path


def _points(raw: dict) -> int | None:
    points = raw.get("points")
    return points if isinstance(points, int) and not isinstance(points, bool) else None


def positive_points(data: dict) -> Iterator[Finding]:
    criteria = data.get("criteria")
    if criteria is not None and not isinstance(criteria, list):
        return   # a schema error already says so
    if not any((_points(raw) or 0) > 0 for path, raw in _raw_items(data) if path[0] == "criteria"):
        yield (("criteria",) if criteria is not None else (),
               "no criterion has positive points, so the score has no denominator; "
               "add at least one criterion with points > 0", "no-positive-points", ERROR)


def _statements(raw: dict) -> list[str]:
    texts = [raw.get("text")]
    judge = raw.get("judge")
    texts.append(judge.get("text") if isinstance(judge, dict) else judge)
    return [t for t in texts if isinstance(t, str) and t]


def sign_mistakes(data: dict) -> Iterator[Finding]:
    for path, raw in _raw_items(data):
        points = _points(raw)
        if path[0] != "criteria" or not points:
            continue
        for statement in _statements(raw):
            words = SUCCESS_WORDS if points < 0 else FAILURE_WORDS
            match = words.search(statement)
            if not match:
                continue
            if points < 0:
                message = (f"penalty ({points} points) is phrased as a reward ('{match.group(0)}'): "
                           "a penalty's text should describe the bad behaviour, which is penalised when it occurs")
            else:
                message = (f"reward (+{points} points) is phrased as a failure ('{match.group(0)}'): "
                           "describe the good behaviour, or make the points negative")
            yield path + ("points",), message, "sign-mismatch", WARNING
            break


# Words too common to tie a sentence of the reference to an item.
_COMMON = frozenset("that with from this their them they which about into there were when what have been each every "
                    "than then only also more does will must should item agent work task says said give gives "
                    "given both over under after before other same such your".split())


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z][a-z-]{3,}", text.lower()) if w not in _COMMON}


def facts_suggestions(data: dict) -> Iterator[Finding]:
    """A gate or reward judged without facts whose text names an id, an amount, an address or a date, or whose words
    meet a sentence of the reference that names some: a warning suggesting them as facts. (Not for penalties: what a
    penalised behaviour must mention is rarely a value the rubric names; the author adds those facts by hand.)"""
    from rubrics.checks.facts import KINDS, named_facts

    reference = data.get("reference") if isinstance(data.get("reference"), str) else ""
    sentences = [s for s in re.split(r"(?<=[.;])\s+|\n", reference[:100_000]) if s.strip()]
    for path, raw in _raw_items(data):
        judge = raw.get("judge")
        options = judge if isinstance(judge, dict) else {"text": judge}
        text = options.get("text")
        rewarded = path[0] == "gates" or (_points(raw) or 0) > 0
        if not isinstance(text, str) or "facts" in options or not rewarded:
            continue
        named = named_facts(text)
        if not named:
            words = _words(text)
            named = [n for sentence in sentences if len(words & _words(sentence)) >= 2
                     for n in named_facts(sentence, bare_decimals=False)]
        named = list({n.text: n for n in named}.values())[:8]
        if not named:
            continue
        listed = ", ".join(f"{n.text} ({KINDS[n.kind]})" for n in named)
        facts = ", ".join(n.text if re.fullmatch(r"[\w.@$%₹€£,-]+", n.text) and not n.text.startswith(("-", "$"))
                          else f'"{n.text}"' for n in named)
        where = "its text" if named_facts(text) else "the reference, beside its words"
        yield (path + ("judge",),
               f"this judge item depends on {listed}, named in {where}: did you mean "
               f"judge: {{text: ..., facts: [{facts}]}}? A fact missing from the item's evidence then decides it "
               "unmet without asking the judge", "facts-suggested", WARNING)
