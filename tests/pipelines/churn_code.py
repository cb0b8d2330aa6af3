"""A team's training code in the shapes a declaration reads (tests/pipelines/test_hyperparameters.py):
never run, only read. It imports nothing a declaration would need: kfstack reads its source."""

from __future__ import annotations

from typing import Annotated, Literal

ROWS = 10


def train(
    epochs: int = 3,
    learning_rate: Annotated[float, "a team's own metadata"] = 0.01,
    activation: Literal["relu", "tanh"] = "relu",
    shuffle: bool = True,
    seed=7,
    layers: list[int] | None = None,
    batch_size: int = ROWS * 2,
    *,
    data_dir: str,
    model_dir: str,
) -> None:
    """Trains the churn model.

    Args:
        epochs: Passes over the data,
            each ending with a checkpoint.
        learning_rate (float): Adam's step size.
        activation: The hidden layer's.
        shuffle: Shuffle the rows every epoch.
        seed: The run's seed.
        layers: Not a hyperparameter (a list): the code keeps its default.
        batch_size: Computed: not a hyperparameter either.
        data_dir: Where the splits are.
        model_dir: Where the model goes.

    Returns:
        Nothing.
    """


def main(argv: list[str] | None = None, *, data_dir: str, model_dir: str) -> None:
    """Parses its own options (``--epochs``, ``--learning-rate``) from ``argv``."""


def mixed(argv: list[str] | None = None, epochs: int = 3) -> None:
    """Takes both an argv and a keyword hyperparameter: refused."""
