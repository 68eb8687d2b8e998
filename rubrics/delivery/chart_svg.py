"""The pass-rate distribution per category as a hand-written SVG (no plotting library; same input, same bytes).

One row per category; seven bins of pass rate, 0% and 100% on their own because they carry the
inspect and drop labels; bar height is the number of tasks in the bin.
"""
from __future__ import annotations

from html import escape

BINS = ("0%", "1-20%", "21-40%", "41-60%", "61-80%", "81-99%", "100%")
COLORS = ("#d98c1f", "#3b8f5a", "#3b8f5a", "#3b8f5a", "#3b8f5a", "#3b8f5a", "#b8433a")   # inspect, keep..., drop
LABEL_W, BIN_W, BAR_W, ROW_H, BAR_MAX_H, TOP, AXIS_H = 180, 64, 44, 96, 60, 40, 22


def bin_index(successes: int, attempts: int) -> int:
    """Integer arithmetic, so that 3/5 lands in 41-60% and not, by rounding, in 61-80%."""
    if successes == 0:
        return 0
    if successes == attempts:
        return len(BINS) - 1
    fifths = -(-5 * successes // attempts)   # ceil(5 * rate), in 1..5
    return fifths


def pass_rate_svg(rates: dict[str, list[tuple[int, int]]]) -> str:
    """rates: category -> [(successes, attempts), ...] of its calibrated tasks."""
    categories = sorted(rates)
    counts = {c: [0] * len(BINS) for c in categories}
    for c in categories:
        for successes, attempts in rates[c]:
            counts[c][bin_index(successes, attempts)] += 1
    tallest = max([n for row in counts.values() for n in row] + [1])
    width = LABEL_W + BIN_W * len(BINS) + 20
    height = TOP + ROW_H * max(len(categories), 1) + AXIS_H
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
        f'<text x="10" y="22" font-size="14" font-weight="bold">Pass rate per task, by category</text>',
    ]
    for i, (name, color) in enumerate((("inspect", COLORS[0]), ("keep", COLORS[1]), ("drop", COLORS[-1]))):
        x = LABEL_W + 180 + 90 * i
        out.append(f'<rect x="{x}" y="11" width="12" height="12" fill="{color}"/>')
        out.append(f'<text x="{x + 17}" y="22">{name}</text>')
    for row, category in enumerate(categories):
        base = TOP + ROW_H * (row + 1) - 14
        total = sum(counts[category])
        out.append(f'<text x="10" y="{base - 24}">{escape(category)}</text>')
        out.append(f'<text x="10" y="{base - 8}" fill="#666666">{total} task{"s" if total != 1 else ""}</text>')
        out.append(f'<line x1="{LABEL_W}" y1="{base}" x2="{LABEL_W + BIN_W * len(BINS)}" y2="{base}" stroke="#999999"/>')
        for i, n in enumerate(counts[category]):
            if n == 0:
                continue
            h = round(BAR_MAX_H * n / tallest, 2)
            x = LABEL_W + BIN_W * i + (BIN_W - BAR_W) // 2
            out.append(f'<rect x="{x}" y="{round(base - h, 2)}" width="{BAR_W}" height="{h}" fill="{COLORS[i]}">'
                       f'<title>{escape(category)}: {n} task(s) at {BINS[i]}</title></rect>')
            out.append(f'<text x="{x + BAR_W // 2}" y="{round(base - h - 4, 2)}" text-anchor="middle">{n}</text>')
    axis_y = TOP + ROW_H * max(len(categories), 1) + 6
    for i, name in enumerate(BINS):
        out.append(f'<text x="{LABEL_W + BIN_W * i + BIN_W // 2}" y="{axis_y}" text-anchor="middle" '
                   f'fill="#444444">{name}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
