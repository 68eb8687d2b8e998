"""The pass-rate distribution per category as a hand-written SVG (no plotting library; same input, same bytes).

One row per category; seven bins of pass rate, 0% and 100% on their own. Each bar is stacked by the
final decision (kept, removed, to inspect), so a removed task never shows as kept; a mark above the
bar counts the flagged tasks in it (flaky, too few attempts, failed check or validation, ...).
"""
from __future__ import annotations

from dataclasses import dataclass
from html import escape

BINS = ("0%", "1-20%", "21-40%", "41-60%", "61-80%", "81-99%", "100%")
DECISIONS = ("keep", "inspect", "removed")
COLORS = {"keep": "#3b8f5a", "inspect": "#d98c1f", "removed": "#b8433a"}
LABEL_W, BIN_W, BAR_W, ROW_H, BAR_MAX_H, TOP, AXIS_H = 180, 64, 44, 96, 60, 40, 22


@dataclass(frozen=True)
class ChartTask:
    successes: int
    attempts: int
    decision: str      # keep, inspect or removed
    flagged: bool


def bin_index(successes: int, attempts: int) -> int:
    """Integer arithmetic, so that 3/5 lands in 41-60% and not, by rounding, in 61-80%."""
    if successes == 0:
        return 0
    if successes == attempts:
        return len(BINS) - 1
    fifths = -(-5 * successes // attempts)   # ceil(5 * rate), in 1..5
    return fifths


def pass_rate_svg(rates: dict[str, list[ChartTask]]) -> str:
    categories = sorted(rates)
    counts = {c: [{d: 0 for d in DECISIONS} for _ in BINS] for c in categories}
    flagged = {c: [0] * len(BINS) for c in categories}
    for c in categories:
        for task in rates[c]:
            i = bin_index(task.successes, task.attempts)
            counts[c][i][task.decision] += 1
            flagged[c][i] += task.flagged
    tallest = max([sum(b.values()) for row in counts.values() for b in row] + [1])
    width = LABEL_W + BIN_W * len(BINS) + 20
    height = TOP + ROW_H * max(len(categories), 1) + AXIS_H
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
        '<text x="10" y="22" font-size="14" font-weight="bold">Pass rate per task, by category</text>',
    ]
    for i, name in enumerate(DECISIONS):
        x = LABEL_W + 120 + 80 * i
        out.append(f'<rect x="{x}" y="11" width="12" height="12" fill="{COLORS[name]}"/>')
        out.append(f'<text x="{x + 17}" y="22">{name}</text>')
    out.append(f'<text x="{LABEL_W + 360}" y="22">! flagged</text>')
    for row, category in enumerate(categories):
        base = TOP + ROW_H * (row + 1) - 14
        total = sum(sum(b.values()) for b in counts[category])
        out.append(f'<text x="10" y="{base - 24}">{escape(category)}</text>')
        out.append(f'<text x="10" y="{base - 8}" fill="#666666">{total} task{"s" if total != 1 else ""}</text>')
        out.append(f'<line x1="{LABEL_W}" y1="{base}" x2="{LABEL_W + BIN_W * len(BINS)}" y2="{base}" stroke="#999999"/>')
        for i, by_decision in enumerate(counts[category]):
            n = sum(by_decision.values())
            if n == 0:
                continue
            x = LABEL_W + BIN_W * i + (BIN_W - BAR_W) // 2
            top = float(base)
            for decision in DECISIONS:
                k = by_decision[decision]
                if k == 0:
                    continue
                h = round(BAR_MAX_H * k / tallest, 2)
                top = round(top - h, 2)
                out.append(f'<rect x="{x}" y="{top}" width="{BAR_W}" height="{h}" fill="{COLORS[decision]}">'
                           f'<title>{escape(category)}: {k} {decision} task(s) at {BINS[i]}</title></rect>')
            mark = f" !{flagged[category][i]}" if flagged[category][i] else ""
            out.append(f'<text x="{x + BAR_W // 2}" y="{round(top - 4, 2)}" text-anchor="middle">{n}{mark}</text>')
    axis_y = TOP + ROW_H * max(len(categories), 1) + 6
    for i, name in enumerate(BINS):
        out.append(f'<text x="{LABEL_W + BIN_W * i + BIN_W // 2}" y="{axis_y}" text-anchor="middle" '
                   f'fill="#444444">{name}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
