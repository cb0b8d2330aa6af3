"""The flights training code's entry: one module for both frameworks.

    python -m kfstack_examples.flights.training.train --framework=pytorch --epochs=4 --batch_size=1024 \\
        --learning_rate=0.003 --seed=42

The pipeline's ``framework`` decides the job (a TrainJob or PyTorchJob, or a TFJob) and reaches
the code as a hyperparameter of the same name, which picks the trainer here; every other
argument is the trainer's own (:func:`kfstack_examples.flights.training.settings.parse_trainer_args`). Its
locations come from the contract's environment (``KFSTACK_INPUT_URI``...).
"""

from __future__ import annotations

import argparse
import sys

from kfstack.api.training import FRAMEWORKS, PYTORCH


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kfstack_examples.flights.training.train", add_help=False)
    parser.add_argument("--framework", choices=FRAMEWORKS, default=PYTORCH)
    known, rest = parser.parse_known_args(argv)
    # Imported here: a PyTorch replica never loads TensorFlow, nor the other way round.
    if known.framework == PYTORCH:
        from kfstack_examples.flights.training import pytorch_trainer

        return pytorch_trainer.main(rest)
    from kfstack_examples.flights.training import tensorflow_trainer

    return tensorflow_trainer.main(rest)


if __name__ == "__main__":
    sys.exit(main())
