"""A team's code for the distributed-training tests: ``team_code/`` goes on the path of this
process and of every replica it starts (they inherit ``PYTHONPATH``), as a team's installed
package would be."""

import os
import pathlib

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

TEAM_CODE = pathlib.Path(__file__).parent / "team_code"


@pytest.fixture
def team_code(monkeypatch):
    monkeypatch.syspath_prepend(str(TEAM_CODE))
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [str(TEAM_CODE), os.environ.get("PYTHONPATH")]))
    )
    return TEAM_CODE


@pytest.fixture
def dataset(tmp_path) -> str:
    """A Parquet dataset of y = 2x + 1 on [0, 1)."""
    path = tmp_path / "data"
    path.mkdir()
    xs = [i / 64 for i in range(64)]
    pq.write_table(pa.table({"x": xs, "y": [2 * x + 1 for x in xs]}), path / "part-0.parquet")
    return str(path)
