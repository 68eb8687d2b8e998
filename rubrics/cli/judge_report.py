"""The lines `rubric grade` prints on stderr after grading: the judge's usage (and cost) and a panel's agreement."""
from __future__ import annotations

from collections.abc import Sequence


def judge_report_lines(results: Sequence, prices: tuple[float, float] | None = None) -> list[str]:
    from rubrics.judges.panel.agreement import describe, panel_agreement
    from rubrics.judges.usage import cost, total_usage

    lines = []
    usages = [r.judge_usage for r in results if r.judge_usage is not None]
    if usages:
        usage = total_usage(usages)
        lines.append(f"judge usage: {usage.prompt_tokens} prompt tokens ({usage.computed_tokens} computed, "
                     f"{usage.cached_tokens} from the prefix cache), {usage.completion_tokens} generated tokens, "
                     f"{usage.cached_verdicts} verdicts from the verdict cache")
        if prices is not None:
            lines.append(f"judge cost: ${cost(usage, *prices):.6f} at ${prices[0]:g} per million prompt tokens and "
                         f"${prices[1]:g} per million generated tokens (cached prompt tokens at the full price)")
    agreement = panel_agreement(item.members for r in results for item in r.items)
    if agreement is not None:
        lines.append(describe(agreement))
    return lines
