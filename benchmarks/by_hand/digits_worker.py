"""One TensorFlow worker of the digits training by hand: what a TFJob's worker pod runs, minus
kfstack's entrypoint.

    TF_CONFIG=... KFSTACK_INPUT_URI=... KFSTACK_MODEL_DIR=... KFSTACK_CHECKPOINT_URI=... \\
        python -m benchmarks.by_hand.digits_worker --hidden_units=64 --dropout=0.1 ...

Calls the team's ``kfstack_examples.digits.trainer:train`` with the ``--name=value`` arguments as
keyword arguments of the types the code declares (``HYPERPARAMETERS``); the locations come from
the contract's environment, which the caller sets (the model folder must exist).
"""

from __future__ import annotations

import sys

from kfstack_examples.digits.trainer import HYPERPARAMETERS, train

TYPES = {"int": int, "float": float, "str": str}


def main(argv: list[str] | None = None) -> int:
    kwargs: dict[str, object] = {}
    for argument in sys.argv[1:] if argv is None else argv:
        name, _, value = argument.removeprefix("--").partition("=")
        kwargs[name] = TYPES[HYPERPARAMETERS.get(name, "str")](value)
    train(**kwargs)  # type: ignore[arg-type]
    return 0


if __name__ == "__main__":
    sys.exit(main())
