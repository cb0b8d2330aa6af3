"""A team's tunable function with no framework: a score that peaks at depth 6 with adam, printed
per epoch as Katib metric lines, and a model file on rank 0."""

import os


def fit(depth: int, learning_rate: float, optimizer: str = "sgd", epochs: int = 3) -> None:
    assert isinstance(depth, int) and isinstance(learning_rate, float)  # typed by the declaration
    for epoch in range(1, epochs + 1):
        score = 1.0 - abs(depth - 6) / 10 - (0.1 if optimizer == "sgd" else 0.0) - 0.01 * (epochs - epoch)
        print(f"epoch={epoch} score={score:.4f} loss={1 - score:.4f}")
    if int(os.environ.get("RANK", "0")) == 0:
        with open(os.path.join(os.environ["KFSTACK_MODEL_DIR"], "model.json"), "w") as f:
            f.write(f'{{"depth": {depth}}}')
