"""Atomic per-epoch checkpoints and finding the latest one."""

import os

import pytest

from kfstack.errors import InvalidParameterError
from kfstack.training import checkpoints


def test_latest_checkpoint_and_pruning(tmp_path):
    uri = str(tmp_path / "ckpt")
    assert checkpoints.latest_checkpoint(uri) is None
    for epoch in (1, 2, 3):
        checkpoints.write_atomically(uri, checkpoints.checkpoint_name(epoch), f"state {epoch}".encode())
    assert checkpoints.latest_checkpoint(uri) == (3, b"state 3")
    checkpoints.prune(uri, keep=2)
    assert [e for e, _ in checkpoints.list_checkpoints(uri)] == [2, 3]


def test_a_half_written_file_is_never_taken_for_a_checkpoint(tmp_path):
    uri = str(tmp_path / "ckpt")
    checkpoints.write_atomically(uri, checkpoints.checkpoint_name(1), b"complete")
    # What a process killed mid-write leaves behind: the temporary name only.
    (tmp_path / "ckpt" / ".epoch-0002.ckpt.abc.tmp").write_bytes(b"trunc")
    assert checkpoints.latest_checkpoint(uri) == (1, b"complete")
    assert not any(
        name.endswith(".tmp") for name in os.listdir(tmp_path / "ckpt") if name.startswith("epoch-")
    )


def test_save_keeps_the_newest_and_loads_by_epoch(tmp_path):
    uri = str(tmp_path / "ckpt")
    for epoch in range(1, 5):
        checkpoints.save_checkpoint(uri, epoch, bytes([epoch]), keep=2)
    assert [e for e, _ in checkpoints.list_checkpoints(uri)] == [3, 4]
    assert checkpoints.load_checkpoint(uri, 3) == b"\x03"
    with pytest.raises(InvalidParameterError):
        checkpoints.prune(uri, keep=0)


def test_checkpoints_on_a_non_local_filesystem(tmp_path):
    uri = "memory://kfstack-ckpt-test/run"
    checkpoints.save_checkpoint(uri, 1, b"one")
    checkpoints.save_checkpoint(uri, 2, b"two")
    assert checkpoints.latest_checkpoint(uri) == (2, b"two")
