"""Which Parquet shards a rank reads: balanced, disjoint, and together covering the split."""

from __future__ import annotations

import fsspec
import fsspec.implementations.local
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from kfstack.errors import DataQualityError, InvalidParameterError


def list_shards(split_uri: str) -> list[str]:
    """The split's ``*.parquet`` files (any fsspec URI), sorted so every rank sees one order.

    Spark's ``_SUCCESS`` marker and other files are ignored.

    Raises:
        InvalidParameterError: ``split_uri`` is not a directory.
    """
    fs, path = fsspec.core.url_to_fs(split_uri)
    if not fs.isdir(path):
        raise InvalidParameterError(f"{split_uri} is not a directory of Parquet shards")
    files = sorted(p for p in fs.ls(path, detail=False) if p.endswith(".parquet"))
    if isinstance(fs, fsspec.implementations.local.LocalFileSystem):
        return files
    # Object-store listings drop the scheme; put it back so the URIs open on any rank.
    return [fs.unstrip_protocol(p) for p in files]


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
    """Reads and concatenates ``columns`` of the given shards into NumPy arrays.

    Args:
        shards: Shard URIs (local paths or any fsspec URI).
        columns: Columns to read; a missing one is an error naming the shard.

    Returns:
        Column name -> one array over all shards, in shard order.

    Raises:
        DataQualityError: A shard is not Parquet or lacks one of ``columns``.
    """
    tables = []
    for uri in shards:
        with fsspec.open(uri, "rb") as f:
            try:
                parquet = pq.ParquetFile(f)
            except pa.ArrowException as err:
                raise DataQualityError(f"{uri} is not a readable Parquet shard: {err}") from err
            missing = [c for c in columns if c not in parquet.schema_arrow.names]
            if missing:
                raise DataQualityError(
                    f"{uri} lacks columns {missing}: was it written with this feature spec?"
                )
            tables.append(parquet.read(columns=columns))
    if not tables:
        return {c: np.empty(0) for c in columns}
    return {c: np.concatenate([t[c].to_numpy() for t in tables]) for c in columns}


def shard_rows(shards: list[str]) -> list[int]:
    """Row count of each shard, from its Parquet footer (the data is not read)."""
    counts = []
    for uri in shards:
        with fsspec.open(uri, "rb") as f:
            counts.append(pq.ParquetFile(f).metadata.num_rows)
    return counts


def rows_per_rank(split_uri: str, world_size: int) -> list[int]:
    """Rows each rank of ``world_size`` reads from ``split_uri`` (each rank its own shards).

    Every rank can compute every other rank's count from the footers alone, so ranks agree on
    a step count without a collective.
    """
    all_shards = list_shards(split_uri)
    counts = dict(zip(all_shards, shard_rows(all_shards), strict=False))
    return [
        sum(counts[s] for s in shards_for_rank(all_shards, rank, world_size)) for rank in range(world_size)
    ]


def read_split(
    spec, split_uri: str, rank: int = 0, world_size: int = 1
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The model inputs of rank ``rank``'s shards of a split (all shards for rank 0 of 1).

    Args:
        spec: What names the columns: its ``label``, ``categorical_columns`` and ``numeric_columns``.

    Returns:
        ``(categorical int64 [rows, n_categorical], numeric float32 [rows, n_numeric],
        labels float32 [rows])``, the interface of both trainers and of the exported model.
    """
    mine = shards_for_rank(list_shards(split_uri), rank, world_size)
    columns = read_shards(mine, [spec.label, *spec.categorical_columns, *spec.numeric_columns])
    categorical = np.stack([columns[c] for c in spec.categorical_columns], axis=1).astype(np.int64)
    numeric = np.stack([columns[c] for c in spec.numeric_columns], axis=1).astype(np.float32)
    return categorical, numeric, columns[spec.label].astype(np.float32)
