"""The words every problem report shares, on the ground floor so that each package that reports problems (the
check families' lint, the rubric's validation and lint, the delivery tools) reads them from below: the two
severities, and the one did-you-mean of every message that refuses a name."""
from __future__ import annotations

import difflib

ERROR = "error"
WARNING = "warning"
# A word this long that begins exactly one candidate names it ("smollm" for smollm2-135m-instruct), though too
# short beside it for difflib's ratio; shorter ones ("fi") begin too many things to be read as a name.
MIN_PREFIX = 3


def did_you_mean(word: str, candidates) -> str:
    """The hint " (did you mean 'X'?)" for the candidate closest to word (a typo of it, or the start of it and of
    no other), else "": the one did-you-mean of every message that refuses a name (rubric keys, selectors, catalog
    models), so that they all suggest alike."""
    folded: dict[str, str] = {}   # case aside ("In" for in, "SmolLM2" for smollm2-...): lowered -> as written
    for name in candidates:
        folded.setdefault(str(name).lower(), str(name))
    word = str(word).lower()   # a YAML key may be a number
    close = difflib.get_close_matches(word, list(folded), n=1, cutoff=0.6) or only_prefix_of(word, list(folded))
    return f" (did you mean '{folded[close[0]]}'?)" if close else ""


def only_prefix_of(word: str, names: list[str]) -> list[str]:
    """[the one name that word begins], or [] when it begins none or several."""
    if len(word) < MIN_PREFIX:
        return []
    starting = [name for name in names if name.startswith(word)]
    return starting if len(starting) == 1 else []
