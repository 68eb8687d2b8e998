"""`rubric view RESULTS.jsonl`: look at grading results in a browser, served on 127.0.0.1 or written as one file.

Also opens `rubric judge-eval --json OUT` output, and with --compare puts two runs of the same trajectories side
by side. Everything the page needs ships in the package: no network, no CDN.
"""
from __future__ import annotations

import sys


def register(subparsers) -> None:
    from rubrics.cli.grade import prices

    parser = subparsers.add_parser(
        "view", help="look at results in a local page (run, trajectories, compare, judge-eval)",
        description="Serve a page on 127.0.0.1 showing a results file (from rubric grade --format jsonl or json) "
                    "or rubric judge-eval --json output; --static writes the page as one self-contained HTML file.")
    parser.add_argument("results", metavar="RESULTS.jsonl")
    parser.add_argument("--compare", metavar="OTHER.jsonl",
                        help="a second results file of the same trajectories: score differences, flipped items, "
                             "and the mean difference with a bootstrap interval")
    parser.add_argument("--trajectories", nargs="+", default=[], metavar="DIR|FILE",
                        help="the graded trajectories, to show them with the parts the evidence came from marked")
    parser.add_argument("--rubric", action="append", default=[], metavar="RUBRIC",
                        help="the rubric(s) graded with: judge items' exact thresholds and uncertain bands "
                             "(without it the page uses what the evidence states, else the defaults)")
    parser.add_argument("--price-per-mtok", type=prices, metavar="IN,OUT",
                        help="show the judging cost at these prices per million prompt and generated tokens")
    parser.add_argument("--port", type=int, default=8765, help="port on 127.0.0.1 (default 8765; 0: any free one)")
    parser.add_argument("--open", action="store_true", help="open the page in the default browser")
    parser.add_argument("--static", metavar="OUT.html", help="write the page to this file instead of serving it")
    parser.set_defaults(handler=run, parser=parser)


def run(args) -> int:
    from rubrics.view.build import ViewInputError, ViewInputs, build_view_data
    from rubrics.view.render import render_page

    if not 0 <= args.port <= 65535:
        args.parser.error("--port: expected 0 to 65535")
    inputs = ViewInputs(results=args.results, compare=args.compare, trajectories=args.trajectories,
                        rubrics=args.rubric, prices=args.price_per_mtok)
    try:
        data = build_view_data(inputs)   # built once up front, so a file that cannot be read fails here
    except ViewInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for problem in data.problems:
        print(f"warning: {problem.file}:{problem.line}: {problem.message}", file=sys.stderr)
    if args.static:
        try:
            with open(args.static, "w", encoding="utf-8") as out:
                out.write(render_page(data))
        except OSError as exc:
            print(f"error: {args.static}: {exc.strerror or exc}", file=sys.stderr)
            return 1
        print(f"wrote {args.static}", file=sys.stderr)
        if args.open:
            import webbrowser
            from pathlib import Path

            webbrowser.open(Path(args.static).resolve().as_uri())
        return 0
    from rubrics.view.server import serve

    return serve(lambda: render_page(build_view_data(inputs)), args.port, args.open)
