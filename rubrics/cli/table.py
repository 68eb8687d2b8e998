"""Plain-text result table (no rich dependency in the core)."""
from __future__ import annotations

import re

# Characters a terminal acts on instead of showing: C0/C1 controls (ESC starts colour and cursor sequences),
# line and paragraph separators, bidirectional overrides (they reorder what is shown), and lone surrogates
# (not encodable as UTF-8). Ids, evidence and error messages come from trajectories and servers.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _escape(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """Text safe to print on a terminal: each unprintable character as an escape such as \\x1b."""
    return _UNPRINTABLE.sub(_escape, text)


def _gates(result) -> str:
    return {True: "pass", False: "FAIL", None: "error"}[result.gates_passed]


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"   # null: the result is incomplete


def _range(result) -> str:
    if result.score_low is None or result.score_high is None:
        return "-"
    return f"{result.score_low:.3f}-{result.score_high:.3f}"


def align(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]


def _one_line(text: str, limit: int = 110) -> str:
    text = printable(" ".join(text.split()))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def item_rows(result) -> list[list[str]]:
    rows = []
    for item in result.items:
        points = "gate" if item.kind == "gate" else f"{item.points:+d}"
        detail = item.error if item.status == "error" else item.evidence
        status = item.status + ("?" if item.uncertain else "")   # a verdict close to a coin
        rows.append([f"  {printable(item.id)}", status, item.method, points, _one_line(detail or "")])
    return rows


def tag_rows(result) -> list[list[str]]:
    """--verbose: one row per tag of the result, under its items."""
    return [[f"  #{printable(tag)}", _number(score.score), "", "", f"{score.earned}/{score.total}"
             + ("" if score.complete else " (incomplete)")] for tag, score in result.tags.items()]


def tag_summary(results) -> list[str]:
    """Per tag: the mean of its scores over the results that have it (a tag of penalties only has none)."""
    scores: dict[str, list[float]] = {}
    for result in results:
        for tag, score in result.tags.items():
            if score.score is not None:
                scores.setdefault(tag, []).append(score.score)
    if not scores:
        return []
    rows = [["tag", "mean score", "results"]] + [[printable(tag), f"{sum(v) / len(v):.3f}", str(len(v))]
                                                 for tag, v in sorted(scores.items())]
    return [""] + align(rows)


def render_aggregate(aggregate) -> str:
    """`--aggregate healthbench` under the table: the clipped mean, its bootstrap std and n, then each tag's."""
    def row(name, figure):
        return [name, f"{figure.mean:.4f}", f"{figure.bootstrap_std:.4f}", str(figure.n_samples)]

    rows = [["healthbench", "mean (clipped)", "bootstrap std", "n"]]
    if aggregate.overall is not None:
        rows.append(row("overall", aggregate.overall))
    rows += [row(printable(tag), figure) for tag, figure in aggregate.tags.items()]
    lines = [""] + align(rows)
    if aggregate.excluded:
        lines.append(f"left out: {len(aggregate.excluded)} incomplete result(s), e.g. "
                     f"{printable(aggregate.excluded[0])}")
    return "\n".join(lines) + "\n"


def render_table(results, verbose: bool = False) -> str:
    header = ["trajectory", "score", "expected", "range", "uncertain", "gates", "earned/total", "complete"]
    summary = [header] + [[printable(r.trajectory_id), f"{r.score:.3f}", _number(r.expected_score), _range(r),
                           str(r.uncertain_items), _gates(r), f"{r.earned}/{r.total}", "yes" if r.complete else "NO"]
                          for r in results]
    aligned = align(summary)
    if not verbose:
        lines = aligned
    else:
        per_item = [item_rows(r) + tag_rows(r) for r in results]
        flat = [row for rows in per_item for row in rows]
        item_lines = iter(align(flat)) if flat else iter(())
        lines = aligned[:1]
        for line, rows in zip(aligned[1:], per_item):
            lines += [line] + [next(item_lines) for _ in rows]
    lines += tag_summary(results)
    errors = [i for r in results for i in r.items if i.status == "error"]
    if errors:
        lines.append(f"incomplete: {len(errors)} item(s) could not be evaluated (e.g. {printable(errors[0].error)}); "
                     "they count as 0, so those scores are partial")
    uncertain = sum(r.uncertain_items for r in results)
    if uncertain:
        lines.append(f"uncertain: {uncertain} judge verdict(s) had a probability in the uncertain band "
                     "(marked ? with --verbose); range is the score with those falling either way")
    return "\n".join(lines) + "\n"
