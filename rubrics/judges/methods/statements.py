"""A rubric item's text turned into sentences about the agent's work: a statement, its negation, a question.

Rubric items are usually written as a verb phrase in the third person ("flags the 2 expenses approved without
sign-off"). Those become "The agent's work flags ...", "The agent's work does not flag ..." and "Does the agent's
work flag ...?". An item that does not open with such a verb ("one page, readable by a CFO") becomes a clause:
"In the agent's work, one page, readable by a CFO." The English is rule-based and small on purpose; a phrase it
gets wrong still reads as the item, which is what the model is asked about.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

_THIRD_PERSON = re.compile(r"^[a-z]+[^s]s$")
_IRREGULAR = {"does": "do", "has": "have", "goes": "go"}
_COPULAS = ("is", "was")
SUBJECT = "The agent's work"
CLAUSE_LEAD_IN = "In the agent's work,"


@dataclass(frozen=True)
class Phrase:
    text: str            # the item, whitespace collapsed, without a final period
    verb: str | None     # its opening third-person verb, when it has one
    rest: str            # what follows the verb

    @classmethod
    def of(cls, criterion: str) -> "Phrase":
        text = " ".join(criterion.split()).rstrip(".")
        first, _, rest = text.partition(" ")
        if _THIRD_PERSON.match(first) or first in _IRREGULAR or first in _COPULAS:
            return cls(text, first, rest)
        return cls(text, None, text)


def base_form(verb: str) -> str:
    """flags -> flag, matches -> match, applies -> apply, does -> do, has -> have."""
    if verb in _IRREGULAR:
        return _IRREGULAR[verb]
    if verb.endswith("ies") and len(verb) > 4:
        return verb[:-3] + "y"
    if verb.endswith(("sses", "shes", "ches", "xes", "zzes")):
        return verb[:-2]
    return verb[:-1]


def _joined(*words: str) -> str:
    return " ".join(word for word in words if word)


def statement_parts(criterion: str) -> tuple[str, str]:
    """(lead-in for the assistant turn, the statement's scored continuation).

    "flags the 2 expenses" -> ("The agent's work", " flags the 2 expenses.")"""
    phrase = Phrase.of(criterion)
    if phrase.verb is None:
        return CLAUSE_LEAD_IN, f" {phrase.text}."
    return SUBJECT, f" {phrase.text}."


def negation_parts(criterion: str) -> tuple[str, str, str]:
    """(lead-in, statement continuation, negated continuation): " flags X." against " does not flag X."."""
    phrase = Phrase.of(criterion)
    lead_in, statement = statement_parts(criterion)
    if phrase.verb is None:
        return lead_in, statement, f" it is not the case that {phrase.text}."
    if phrase.verb in _COPULAS:
        return lead_in, statement, f" {_joined(phrase.verb, 'not', phrase.rest)}."
    return lead_in, statement, f" {_joined('does not', base_form(phrase.verb), phrase.rest)}."


def question(criterion: str) -> str:
    """"flags X" -> "Does the agent's work flag X?"; a clause -> "Is this true of the agent's work: X?"."""
    phrase = Phrase.of(criterion)
    if phrase.verb is None:
        return f"Is this true of the agent's work: {phrase.text}?"
    if phrase.verb in _COPULAS:
        return f"{phrase.verb.capitalize()} the agent's work {phrase.rest}?".replace(" ?", "?")
    return f"Does the agent's work {_joined(base_form(phrase.verb), phrase.rest)}?"
