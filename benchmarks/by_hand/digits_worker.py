"""One TensorFlow worker of the digits training by hand: what a TFJob's worker pod runs, minus
kfstack's entrypoint.

    TF_CONFIG=... KFSTACK_INPUT_URI=... KFSTACK_MODEL_DIR=... KFSTACK_CHECKPOINT_URI=... \\
        python -m benchmarks.by_hand.digits_worker --hidden_units=64 --dropout=0.1 ...

Calls the team's ``kfstack_examples.digits.trainer:train`` with the ``--name=value`` arguments as
keyword arguments of the types its signature declares; the locations come from
the contract's environment, which the caller sets (the model folder must exist).
"""

from __future__ import annotations

import inspect
import sys

from kfstack_examples.digits.trainer import train

# Each hyperparameter's type, as train()'s signature declares it (a Literal's: str).
TYPES = {
    name: parameter.annotation if parameter.annotation in (int, float) else str
    for name, parameter in inspect.signature(train, eval_str=True).parameters.items()
}


def main(argv: list[str] | None = None) -> int:
    kwargs: dict[str, object] = {}
    for argument in sys.argv[1:] if argv is None else argv:
        name, _, value = argument.removeprefix("--").partition("=")
        kwargs[name] = TYPES.get(name, str)(value)
    train(**kwargs)  # type: ignore[arg-type]
    return 0


if __name__ == "__main__":
    sys.exit(main())
