"""Each rank reads its own shards: balanced, disjoint, covering."""

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kfstack.errors import DataQualityError, InvalidParameterError
from kfstack.training.shards import list_shards, read_shards, shards_for_rank


@pytest.mark.parametrize(("n_shards", "world_size"), [(4, 2), (5, 2), (7, 3), (3, 3), (8, 1)])
def test_assignment_is_balanced_disjoint_and_covering(n_shards, world_size):
    shards = [f"part-{i}" for i in range(n_shards)]
    per_rank = [shards_for_rank(shards, r, world_size) for r in range(world_size)]
    flat = [s for mine in per_rank for s in mine]
    assert sorted(flat) == sorted(shards) and len(flat) == len(set(flat))
    sizes = [len(mine) for mine in per_rank]
    assert max(sizes) - min(sizes) <= 1


def test_fewer_shards_than_ranks_is_refused():
    with pytest.raises(InvalidParameterError, match="2 shards cannot feed 3 ranks"):
        shards_for_rank(["a", "b"], 0, 3)


def test_listing_and_reading_real_shards(feature_dir):
    shards = list_shards(f"{feature_dir}/train")
    assert [s.rsplit("/", 1)[-1] for s in shards] == ["part-00000.parquet", "part-00001.parquet"]
    mine = read_shards(shards_for_rank(shards, 1, 2), ["label", "num__signal"])
    both = read_shards(shards, ["label"])
    assert len(mine["label"]) == len(mine["num__signal"]) == 2000
    assert len(both["label"]) == 4000


def test_shards_on_a_non_local_filesystem_keep_their_scheme():
    fs = fsspec.filesystem("memory")
    for i in (1, 0):
        with fs.open(f"/kfstack-test/train/part-{i}.parquet", "wb") as f:
            pq.write_table(pa.table({"label": [i, i]}), f)
    fs.pipe("/kfstack-test/train/_SUCCESS", b"")
    shards = list_shards("memory://kfstack-test/train")
    assert shards == [
        "memory:///kfstack-test/train/part-0.parquet",
        "memory:///kfstack-test/train/part-1.parquet",
    ]
    assert read_shards(shards, ["label"])["label"].tolist() == [0, 0, 1, 1]


def test_a_shard_without_the_spec_columns_is_a_data_error(feature_dir):
    with pytest.raises(DataQualityError, match="lacks columns"):
        read_shards(list_shards(f"{feature_dir}/test"), ["label", "cat__missing"])
