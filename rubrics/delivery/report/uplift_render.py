"""uplift.md and uplift.svg from an UpliftReport: the table a lab reads and a bar chart of the pass rates."""
from __future__ import annotations

from html import escape

from rubrics.delivery.report.uplift import Difference, ModelFigures, UpliftReport

UPLIFT_MD, UPLIFT_JSON, UPLIFT_SVG = "uplift.md", "uplift.json", "uplift.svg"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def _rate(m: ModelFigures) -> str:
    if m.pass_rate is None:
        return "-"
    return f"{_pct(m.pass_rate)} ({_pct(m.pass_rate_low)}-{_pct(m.pass_rate_high)})"


def _diff(d: Difference) -> str:
    if d.value is None:
        return "-"
    return f"{100 * d.value:+.1f} pts [{100 * (d.low or 0):+.1f}, {100 * (d.high or 0):+.1f}]"


def uplift_markdown(report: UpliftReport) -> str:
    k = report.k
    header = ["category", "tasks", "attempts (base/cand)", "pass rate, baseline", "pass rate, candidate",
              "pass rate diff [95% CI]", f"pass@{k} base/cand", f"pass@{k} diff [95% CI]", f"pass^{k} base/cand",
              f"pass^{k} diff [95% CI]"]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for r in report.rows:
        lines.append("| " + " | ".join([
            r.category, str(r.baseline.tasks), f"{r.baseline.attempts}/{r.candidate.attempts}", _rate(r.baseline),
            _rate(r.candidate), _diff(r.pass_rate), f"{_pct(r.baseline.pass_at_k)} / {_pct(r.candidate.pass_at_k)}",
            _diff(r.pass_at_k), f"{_pct(r.baseline.pass_hat_k)} / {_pct(r.candidate.pass_hat_k)}",
            _diff(r.pass_hat_k)]) + " |")
    excluded = ", ".join(report.excluded_removed) or "none"
    unscored = ", ".join(report.excluded_unscored) or "none"
    return "\n".join([
        "# Uplift on the held-out split\n",
        f"Baseline `{report.baseline_file}` against candidate `{report.candidate_file}` on "
        f"{len(report.heldout_tasks)} held-out task(s): {', '.join(report.heldout_tasks) or 'none'}. "
        f"Excluded: {len(report.excluded_removed)} removed ({excluded}); {len(report.excluded_unscored)} without "
        f"attempts from both models ({unscored}).\n",
        f"An attempt passes at score >= {report.pass_threshold:g}; k = {k}. Pass rates are means over tasks, "
        "with a 95% Wilson interval over the pooled attempts. Differences are candidate minus baseline with a "
        f"bootstrap 95% interval ({report.resamples} resamples, seed {report.seed}: tasks resampled, then "
        "attempts within each task).\n",
        "\n".join(lines) + "\n",
        f"![Pass rate, baseline and candidate]({UPLIFT_SVG})\n",
    ])


def uplift_svg(report: UpliftReport) -> str:
    rows = report.rows
    bar, gap, left, top, scale = 26, 22, 130, 44, 300
    height = top + len(rows) * (2 * bar + gap) + 30
    width = left + scale + 150
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
           'font-family="sans-serif" font-size="12">', f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
           '<text x="10" y="22" font-size="14" font-weight="bold">Held-out pass rate, baseline and candidate</text>']
    for i, (name, color) in enumerate((("baseline", "#8a8a8a"), ("candidate", "#2f6db3"))):
        out.append(f'<rect x="{left + 120 * i}" y="28" width="12" height="10" fill="{color}"/>')
        out.append(f'<text x="{left + 120 * i + 16}" y="37">{name}</text>')
    for n, row in enumerate(rows):
        y = top + n * (2 * bar + gap)
        out.append(f'<text x="10" y="{y + bar + 4}">{escape(row.category)}</text>')
        for j, (figures, color) in enumerate(((row.baseline, "#8a8a8a"), (row.candidate, "#2f6db3"))):
            rate = figures.pass_rate or 0.0
            w = round(scale * rate, 2)
            yy = y + j * bar
            out.append(f'<rect x="{left}" y="{yy + 3}" width="{w}" height="{bar - 6}" fill="{color}"/>')
            if figures.pass_rate_low is not None and figures.pass_rate_high is not None:
                lo, hi = round(left + scale * figures.pass_rate_low, 2), round(left + scale * figures.pass_rate_high, 2)
                mid = yy + bar // 2
                out.append(f'<line x1="{lo}" y1="{mid}" x2="{hi}" y2="{mid}" stroke="#222222"/>')
            out.append(f'<text x="{left + scale + 8}" y="{yy + bar - 8}">{_pct(figures.pass_rate)}</text>')
    out.append(f'<line x1="{left}" y1="{top - 4}" x2="{left}" y2="{height - 24}" stroke="#999999"/>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
