"""A team's trainer as many are written before kfstack: ``main(argv=None, *, data_dir, model_dir)``
parses dash-style options from its argv with argparse and takes its locations as keyword-only
arguments. No framework: a score that peaks at depth 6, printed per epoch as Katib metric lines,
and a model file on rank 0 holding what it was given."""

import argparse
import glob
import json
import os


def main(argv: list[str] | None = None, *, data_dir: str, model_dir: str) -> None:
    parser = argparse.ArgumentParser(prog="argv_tunable")
    parser.add_argument("--learning-rate", type=float, required=True)
    parser.add_argument("--depth", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=1)
    args = parser.parse_args(argv)
    files = glob.glob(os.path.join(data_dir, "*.parquet"))
    if not files:
        raise FileNotFoundError(f"no Parquet files in {data_dir}")
    for epoch in range(1, args.epochs + 1):
        score = 1.0 - abs(args.depth - 6) / 10 - 0.01 * (args.epochs - epoch)
        print(f"epoch={epoch} score={score:.4f}")
    if int(os.environ.get("RANK", "0")) == 0:
        with open(os.path.join(model_dir, "model.json"), "w") as f:
            json.dump({"argv": argv, "learning_rate": args.learning_rate, "depth": args.depth}, f)
