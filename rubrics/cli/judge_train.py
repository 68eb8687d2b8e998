"""`rubric judge-train LABELS.jsonl... --rubric R... --model M --out HEAD.json`: train a verdict head.

The embedded judge model reads every labelled judgment once (the choice prompt); a logistic regression on its
hidden state at the answer position, with the choice raw score beside it, is fitted to the labels, its layer and
weight decay chosen by cross-validation over folds of whole domains (rubrics/trust/head_training.py). The head
file records the model, the prompt layout, the layer and the training domains; `rubric grade --method head --head
HEAD.json` judges with it.
"""
from __future__ import annotations

import sys

from rubrics.judges.fitted.judge_models import QUANTIZATION_CHOICES


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "judge-train", help="train a verdict head on labels",
        description="Fit a verdict head (logistic regression on the judge model's hidden state at the answer "
                    "position) to labelled judgments; its layer and weight decay are chosen leaving whole domains "
                    "out.")
    parser.add_argument("labels", nargs="+", metavar="LABELS.jsonl")
    parser.add_argument("--rubric", action="append", required=True, metavar="RUBRIC",
                        help="the rubric of the labels; give it once for all files, or once per labels file")
    parser.add_argument("--model", help="judge model: a catalog name or a local HF folder or .gguf (default: the "
                                         "default judge model)")
    parser.add_argument("--quantization", choices=QUANTIZATION_CHOICES,
                        help="int8 linear maps, int8 weights or none (float32 results); default: the model's own "
                             "(int8 for the default judge model); the head is recorded so")
    parser.add_argument("--layer", type=int, action="append", metavar="N",
                        help="a candidate layer (0 = embeddings ... the model's depth = the last, after the final "
                             "norm); repeatable; default: at one half, two thirds, five sixths and all of the depth")
    parser.add_argument("--out", required=True, metavar="HEAD.json", help="where to write the head")
    parser.add_argument("--format", choices=("table", "json"), default="table")
    parser.set_defaults(handler=run, parser=parser)


def run(args) -> int:
    from rubrics.rubric.load import load_rubric
    from rubrics.trust import LabelsError, lifecycle, load_labels

    if len(args.rubric) not in (1, len(args.labels)):
        args.parser.error("give --rubric once, or once per labels file")
    try:
        labelled = [(load_labels(path), load_rubric(args.rubric[min(i, len(args.rubric) - 1)]))
                    for i, path in enumerate(args.labels)]
    except (LabelsError, OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    try:
        trained = lifecycle.train_head(labelled, args.model, quantization=args.quantization, layers=args.layer,
                                       warn=lambda line: print(f"warning: left out {line}", file=sys.stderr))
    except lifecycle.LayerError as exc:
        args.parser.error(str(exc))
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    head, selection = trained["head"], trained["selection"]
    head.write(args.out)
    output = {"head": args.out, "judge": trained["judge"].name, "labels": len(trained["examples"]),
              "left_out": len(trained["left_out"]), "layer": head.layer, "weight_decay": head.weight_decay,
              "training_domains": list(head.training_domains), "folds": [list(f) for f in selection.folds],
              "cross_validated_log_loss": {f"layer {layer}, weight decay {decay:g}": round(loss, 6)
                                           for (layer, decay), loss in selection.cross_validated.items()},
              "in_sample": trained["in_sample"]}
    if args.format == "json":
        import json
        print(json.dumps(output, indent=2))
    else:
        print(render(output))
    return 0


def render(output: dict) -> str:
    lines = [f"wrote {output['head']}: layer {output['layer']}, weight decay {output['weight_decay']:g}, "
             f"{output['labels']} labels from {len(output['training_domains'])} domains "
             f"({output['left_out']} left out), judge {output['judge']}",
             "out-of-fold log-loss (folds of whole domains):"]
    lines += [f"  {name}: {loss:.4f}" for name, loss in output["cross_validated_log_loss"].items()]
    every = output["in_sample"]["by_difficulty"]["all"]
    lines.append(f"in-sample (optimistic): balanced accuracy {every['balanced_accuracy']:.3f}, "
                 f"AUC {every['auc']:.3f}, Brier {every['brier']:.3f}")
    return "\n".join(lines)
