"""A team's training function as most are written before kfstack: its locations are its
arguments, read and written with plain ``open`` and ``os`` calls (no fsspec, no environment)."""

import glob
import json
import os


def train(data_dir: str, model_dir: str, epochs: int = 1) -> None:
    files = sorted(glob.glob(os.path.join(data_dir, "*.parquet")))
    if not files:
        raise FileNotFoundError(f"no Parquet files in {data_dir}")
    sizes = [os.path.getsize(path) for path in files]
    print(f"files={len(files)} loss={1.0 / (1 + epochs)}")
    with open(os.path.join(model_dir, "model.json"), "w") as f:
        json.dump({"files": len(files), "bytes": sum(sizes), "data_dir": data_dir}, f)
