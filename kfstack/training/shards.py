"""Which Parquet shards a rank reads: balanced, disjoint, and together covering the split."""

from __future__ import annotations

import fsspec
import numpy as np
import pyarrow.parquet as pq

from kfstack.errors import InvalidParameterError


def list_shards(split_uri: str) -> list[str]:
    """The split's ``*.parquet`` files (any fsspec URI), sorted so every rank sees one order."""
    fs, path = fsspec.core.url_to_fs(split_uri)
    if not fs.isdir(path):
        raise InvalidParameterError(f"{split_uri} is not a directory of Parquet shards")
    files = sorted(p for p in fs.ls(path, detail=False) if p.endswith(".parquet"))
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    return files if protocol in ("file", "local") else [f"{protocol}://{p}" for p in files]


def shards_for_rank(shards: list[str], rank: int, world_size: int) -> list[str]:
    """Round-robin: rank r reads shards r, r + W, r + 2W, ...; counts differ by at most one.

    Raises:
        InvalidParameterError: Fewer shards than ranks (a rank would read nothing).
    """
    if len(shards) < world_size:
        raise InvalidParameterError(
            f"{len(shards)} shards cannot feed {world_size} ranks: write at least one shard per "
            f"rank (num_shards >= workers)"
        )
    return shards[rank::world_size]


def read_shards(shards: list[str], columns: list[str]) -> dict[str, np.ndarray]:
    """Reads and concatenates ``columns`` of the given shards into NumPy arrays."""
    tables = []
    for uri in shards:
        with fsspec.open(uri, "rb") as f:
            tables.append(pq.read_table(f, columns=columns))
    if not tables:
        return {c: np.empty(0) for c in columns}
    return {c: np.concatenate([t[c].to_numpy() for t in tables]) for c in columns}
