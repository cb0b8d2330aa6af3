"""The command line both trainers take (the same for local processes and cluster pods)."""

from __future__ import annotations

import argparse

from kfstack.errors import InvalidParameterError


def parse_trainer_args(argv: list[str] | None, prog: str) -> argparse.Namespace:
    """``--features-uri --model-uri --checkpoint-uri [--epochs] [--batch-size] [--learning-rate]
    [--seed]``; see :func:`kfstack.components.training.common.trainer_arguments`.

    Raises:
        InvalidParameterError: A value is out of range.
    """
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("--features-uri", required=True)
    parser.add_argument("--model-uri", required=True)
    parser.add_argument("--checkpoint-uri", required=True)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=1024, help="global batch size")
    parser.add_argument("--learning-rate", type=float, default=0.003)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args(argv)
    if args.epochs < 1 or args.batch_size < 1 or args.learning_rate <= 0:
        raise InvalidParameterError("epochs and batch-size must be >= 1 and learning-rate > 0")
    return args
