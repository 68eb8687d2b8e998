"""Does the judge agree with verdicts a person wrote down before grading, on rubrics from domains it never saw?

    python benchmarks/new_user_rubrics.py [--model NAME] [--group [K]]

For each folder under examples/new-user/ (and examples/cfo-mis/, once it has an intended.json) this grades every
trajectory of trajectories/ against rubric.yaml with the embedded judge (--model: a catalog name such as
qwen2.5-coder-1.5b-instruct or smollm2-135m-instruct; default: the default judge model) and prints, per rubric:
- how many judge verdicts are as intended.json says (an item the judge could not evaluate counts as not), and how
  many lie in their uncertain band (a verdict close to a coin);
- each trajectory's score, beside the score the intended verdicts would give;
- whether the ideal trajectory scores strictly above every flawed one: a trajectory that, by the intended
  verdicts (code checks: by their actual status), misses a positive criterion or a gate, or has a penalty.
--group: each folder's trajectories graded as one group of attempts (rubrics.score_group, each attempt compared
side by side with K others, default the library's). Then a total line. The intended verdicts are in each folder's intended.json (see examples/new-user/README.md).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def folders() -> list[Path]:
    """Every example folder with a rubric.yaml and an intended.json."""
    candidates = sorted(p for p in (REPO / "examples" / "new-user").iterdir() if p.is_dir())
    candidates.append(REPO / "examples" / "cfo-mis")
    return [p for p in candidates if (p / "rubric.yaml").exists() and (p / "intended.json").exists()]


def intended_score(items: list[tuple[str, int | None, bool]]) -> float:
    """The score for (kind, points, met) items: 0 when a gate is unmet, else max(0, earned) / total."""
    if any(kind == "gate" and not met for kind, _, met in items):
        return 0.0
    total = sum(points for kind, points, _ in items if kind == "criterion" and points > 0)
    earned = sum(points for kind, points, met in items if kind == "criterion" and met)
    return max(0, earned) / total if total else 0.0


def grade_folder(folder: Path, judge, comparisons: int | None = None) -> dict:
    """Grade one folder's trajectories with judge (comparisons: as one group); compare with its intended.json."""
    import rubrics

    intended = json.loads((folder / "intended.json").read_text())
    paths = sorted((folder / "trajectories").glob("*.json"))
    rubric = str(folder / "rubric.yaml")
    results = rubrics.score_many(paths, rubric, judge=judge) if comparisons is None else \
        rubrics.score_group(paths, rubric, judge=judge, comparisons=comparisons)
    rows, agreed, asked, errors, uncertain = [], 0, 0, 0, 0
    for path, result in zip(paths, results):
        want = intended["verdicts"][path.name]
        ok, statuses = 0, []
        for item in result.items:
            met = item.status == "met"
            if item.method == "judge":
                asked += 1
                errors += item.status == "error"
                uncertain += item.uncertain
                ok += item.status != "error" and met == want[item.id]
                met = want[item.id]
            statuses.append((item.kind, item.points, met))
        flawed = any((kind == "gate" and not met) or (kind == "criterion" and (points > 0) != met)
                     for kind, points, met in statuses)
        agreed += ok
        rows.append({"name": path.name, "score": result.score, "intended_score": intended_score(statuses),
                     "agreed": ok, "judged": len(want), "flawed": flawed, "complete": result.complete})
    ideal = next(r for r in rows if r["name"] == intended["ideal"])
    not_below = [r for r in rows if r is not ideal and r["flawed"] and r["score"] >= ideal["score"]]
    return {"folder": folder.name, "rubric_id": results[0].rubric_id if results else folder.name, "rows": rows,
            "agreed": agreed, "asked": asked, "errors": errors, "uncertain": uncertain, "ideal": ideal["name"],
            "not_below": not_below,
            "ideal_on_top": not not_below}


def pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def report(summary: dict) -> str:
    s = summary
    lines = [f"== {s['folder']} ({s['rubric_id']}): judge verdicts as intended {s['agreed']}/{s['asked']} "
             f"({pct(s['agreed'], s['asked'])}), {s['errors']} not evaluated, {s['uncertain']} uncertain "
             f"({pct(s['uncertain'], s['asked'])})",
             f"  {'trajectory':<40} {'score':>6} {'intended':>9} {'as intended':>12} {'flawed':>6}"]
    for r in s["rows"]:
        name = r["name"] + (" (ideal)" if r["name"] == s["ideal"] else "")
        lines.append(f"  {name:<40} {r['score']:>6.3f} {r['intended_score']:>9.3f} {r['agreed']:>6}/{r['judged']:<5}"
                     f" {'yes' if r['flawed'] else 'no':>6}" + ("" if r["complete"] else "  (incomplete)"))
    verdict = "yes" if s["ideal_on_top"] else "no, not below it: " + ", ".join(
        f"{r['name']} {r['score']:.3f}" for r in s["not_below"])
    lines.append(f"  ideal strictly above every flawed trajectory: {verdict}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None,
                        help="a catalog name (rubric model list), .gguf file or HF folder; default: the default judge")
    parser.add_argument("--group", nargs="?", type=int, const=0, metavar="K",
                        help="grade each folder's trajectories as one group of attempts, each compared with K others "
                             "(default: the library's default)")
    parser.add_argument("--only", action="append", metavar="NAME",
                        help="only this rubric's folder (its name: cfo-mis, hr-rejection, sql-answers); repeatable")
    parser.add_argument("--verdict-cache", metavar="DB",
                        help="keep the verdicts (and comparisons) in this sqlite file, so that a rerun reads them back")
    args = parser.parse_args(argv)
    from rubrics.grading.groups import DEFAULT_COMPARISONS
    from rubrics.judges.backends.embedded import EmbeddedJudge

    judge = EmbeddedJudge(model=args.model)
    model = judge.model
    if args.verdict_cache:
        from rubrics.judges.cache.cached import CachedJudge
        from rubrics.judges.cache.verdict_cache import VerdictCache

        judge = CachedJudge(judge, VerdictCache(args.verdict_cache))
    comparisons = None if args.group is None else args.group or DEFAULT_COMPARISONS
    chosen = [folder for folder in folders() if not args.only or folder.name in args.only]
    if args.only and len(chosen) != len(set(args.only)):
        parser.error(f"--only: the folders are {', '.join(folder.name for folder in folders())}")
    summaries = [grade_folder(folder, judge, comparisons) for folder in chosen]
    for summary in summaries:
        print(report(summary))
    agreed, asked = sum(s["agreed"] for s in summaries), sum(s["asked"] for s in summaries)
    on_top = sum(s["ideal_on_top"] for s in summaries)
    uncertain = sum(s["uncertain"] for s in summaries)
    way = "alone" if comparisons is None else f"in groups, {comparisons} comparisons an attempt"
    print(f"TOTAL ({model}, {way}): judge verdicts as intended {agreed}/{asked} ({pct(agreed, asked)}), "
          f"{uncertain} uncertain; ideal strictly on top in {on_top}/{len(summaries)} rubrics")
    return 0


if __name__ == "__main__":
    sys.exit(main())
