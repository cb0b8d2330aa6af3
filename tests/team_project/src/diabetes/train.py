"""The trainer: a small PyTorch regressor of diabetes progression, written around argparse.

``main(argv=None, *, data_dir, model_dir)`` parses its hyperparameters from ``argv`` (the command
line when None) with dash-style options and takes its locations as keyword-only arguments:
``data_dir`` holds the data step's ``train/`` and ``validation/`` Parquet folders, and rank 0
exports ``model.onnx`` into ``model_dir`` (ten measurements in, the predicted progression out;
the scaling is inside the model, so what serves it sends raw measurements). It never imports
kfstack.

Several processes train it together with DistributedDataParallel over gloo when the environment
says so (``WORLD_SIZE``, ``RANK``, ``MASTER_ADDR``, ``MASTER_PORT``, as a PyTorchJob, a TrainJob's
torchrun or ``torchrun`` by hand set them); each takes its own equal share of the rows. Every
epoch rank 0 prints ``epoch=N val_rmse=... val_loss=...``, the metric lines Katib's StdOut
collector reads. In a tuning trial (``KFSTACK_TRIAL`` set) nothing keeps the model, so none is
exported.
"""

from __future__ import annotations

import argparse
import os

from diabetes import FEATURES, LABEL

MODEL_FILE = "model.onnx"
INPUT_NAME, OUTPUT_NAME = "features", "progression"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="diabetes-train")
    parser.add_argument("--hidden-units", type=int, default=32)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--learning-rate", type=float, default=0.01)
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    if args.hidden_units < 1 or args.epochs < 1 or args.batch_size < 1:
        parser.error("--hidden-units, --epochs and --batch-size must be at least 1")
    if not 0 <= args.dropout < 1:
        parser.error(f"--dropout={args.dropout} must be in [0, 1)")
    if args.learning_rate <= 0:
        parser.error(f"--learning-rate={args.learning_rate} must be positive")
    return args


def load_split(data_dir: str, split: str):
    """``(features, target)`` of one split as float32 arrays, features in :data:`FEATURES` order."""
    import numpy as np
    import pyarrow.dataset as ds

    folder = os.path.join(data_dir, split)
    if not os.path.isdir(folder):
        raise FileNotFoundError(
            f"no {split}/ folder in {data_dir}: the data step writes train/ and validation/"
        )
    table = ds.dataset(folder, format="parquet").to_table()
    missing = [c for c in (*FEATURES, LABEL) if c not in table.column_names]
    if missing:
        raise ValueError(f"{folder} lacks the columns {', '.join(missing)}")
    x = np.stack([table.column(c).to_numpy() for c in FEATURES], axis=1).astype("float32")
    return x, table.column(LABEL).to_numpy().astype("float32")


def main(argv: list[str] | None = None, *, data_dir: str, model_dir: str) -> None:
    """Trains on ``data_dir``'s splits and, on rank 0 outside a tuning trial, writes
    ``model.onnx`` to ``model_dir``."""
    import numpy as np
    import torch
    import torch.distributed as dist
    from torch import nn

    args = parse_args(argv)
    world, rank = int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("RANK", "0"))
    if world > 1:
        dist.init_process_group("gloo")
    torch.manual_seed(args.seed)
    x, y = load_split(data_dir, "train")
    x_val, y_val = load_split(data_dir, "validation")
    if len(x) < world:
        raise ValueError(f"{len(x)} training rows cannot be shared by {world} processes")

    class Regressor(nn.Module):
        """Raw measurements in, progression out: both scalings are buffers of the model."""

        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("x_mean", torch.tensor(x.mean(axis=0)))
            self.register_buffer("x_std", torch.tensor(x.std(axis=0) + 1e-6))
            self.register_buffer("y_mean", torch.tensor(float(y.mean())))
            self.register_buffer("y_std", torch.tensor(float(y.std()) + 1e-6))
            self.layers = nn.Sequential(
                nn.Linear(len(FEATURES), args.hidden_units),
                nn.ReLU(),
                nn.Dropout(args.dropout),
                nn.Linear(args.hidden_units, 1),
            )

        def forward(self, features: torch.Tensor) -> torch.Tensor:
            return self.layers((features - self.x_mean) / self.x_std).squeeze(-1) * self.y_std + self.y_mean

        def standard(self, progression: torch.Tensor) -> torch.Tensor:
            """A progression in the target's standard units: what the loss compares, so that
            the learning rate means the same whatever the target's scale."""
            return (progression - self.y_mean) / self.y_std

    model = Regressor()
    wrapped = nn.parallel.DistributedDataParallel(model) if world > 1 else model
    optimizer = torch.optim.Adam(model.parameters(), lr=args.learning_rate)
    loss_of = nn.MSELoss()
    y_standard = model.standard(torch.from_numpy(y))
    # Equal shares, so every process takes the same number of steps: each step's gradients are
    # averaged across them, and one with a step more would wait for the others forever.
    mine = np.arange(rank, len(x) // world * world, world)
    generator = np.random.default_rng(args.seed + rank)
    per_process = max(1, args.batch_size // world)
    for epoch in range(1, args.epochs + 1):
        wrapped.train()
        order = generator.permutation(mine)
        for start in range(0, len(order), per_process):
            rows = order[start : start + per_process]
            optimizer.zero_grad()
            # Through the wrapper's own forward: DistributedDataParallel averages the gradients
            # of what went through it.
            loss = loss_of(model.standard(wrapped(torch.from_numpy(x[rows]))), y_standard[rows])
            loss.backward()
            optimizer.step()
        if rank == 0:
            model.eval()
            with torch.no_grad():
                predicted = model(torch.from_numpy(x_val))
                target = torch.from_numpy(y_val)
                val_rmse = float(torch.sqrt(torch.mean((predicted - target) ** 2)))
                val_loss = float(loss_of(model.standard(predicted), model.standard(target)))
            print(f"epoch={epoch} val_rmse={val_rmse:.4f} val_loss={val_loss:.4f}", flush=True)
    if rank == 0 and not os.environ.get("KFSTACK_TRIAL"):
        export(model.eval(), x_val, model_dir)
    if world > 1:
        dist.destroy_process_group()


def export(model, sample, model_dir: str) -> str:
    """``model.onnx`` in ``model_dir``: a batch of raw measurements in (``features``, float32
    ``[n, 10]``), the predicted progression out (``progression``, ``[n]``)."""
    import torch

    os.makedirs(model_dir, exist_ok=True)
    path = os.path.join(model_dir, MODEL_FILE)
    torch.onnx.export(
        model,
        (torch.from_numpy(sample[:8]),),
        path,
        input_names=[INPUT_NAME],
        output_names=[OUTPUT_NAME],
        dynamic_shapes={INPUT_NAME: {0: torch.export.Dim("batch")}},
        external_data=False,
        verbose=False,
    )
    return path
