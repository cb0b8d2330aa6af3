"""Per-epoch checkpoints on any fsspec URI, written atomically, found again after a restart.

Files are ``<dir>/epoch-0003.ckpt``. A write goes to a temporary name first and is renamed into
place, so a process killed mid-write never leaves a truncated checkpoint that a restart would
load (object stores have no rename: there ``mv`` is a copy + delete, and the temporary name is
still never picked up because only ``epoch-*.ckpt`` names count).
"""

from __future__ import annotations

import io
import re
import uuid

import fsspec

from kfstack.errors import InvalidParameterError

_NAME = re.compile(r"epoch-(\d+)\.ckpt$")


def checkpoint_name(epoch: int) -> str:
    """The file name of epoch ``epoch``'s checkpoint; zero-padded so names sort by epoch."""
    return f"epoch-{epoch:04d}.ckpt"


def write_atomically(directory_uri: str, name: str, payload: bytes) -> str:
    """Writes ``payload`` to ``<directory_uri>/<name>`` via a temporary name; returns the path.

    Readers see either no file or the whole of it: locally the final step is a rename within one
    directory (atomic on POSIX); on object stores it is the store's copy + delete.
    """
    fs, directory = fsspec.core.url_to_fs(directory_uri)
    fs.makedirs(directory, exist_ok=True)
    final = f"{directory.rstrip('/')}/{name}"
    temporary = f"{directory.rstrip('/')}/.{name}.{uuid.uuid4().hex}.tmp"
    with fs.open(temporary, "wb") as f:
        f.write(payload)
    fs.mv(temporary, final)
    return final


def save_checkpoint(directory_uri: str, epoch: int, payload: bytes, keep: int = 2) -> str:
    """Writes epoch ``epoch``'s checkpoint atomically, then keeps only the ``keep`` newest.

    Returns:
        Where the checkpoint was written.
    """
    path = write_atomically(directory_uri, checkpoint_name(epoch), payload)
    prune(directory_uri, keep=keep)
    return path


def load_checkpoint(directory_uri: str, epoch: int) -> bytes:
    """The payload of epoch ``epoch``'s checkpoint (``FileNotFoundError`` if there is none)."""
    fs, directory = fsspec.core.url_to_fs(directory_uri)
    with fs.open(f"{directory.rstrip('/')}/{checkpoint_name(epoch)}", "rb") as f:
        return f.read()


def list_checkpoints(directory_uri: str) -> list[tuple[int, str]]:
    """``(epoch, path)`` of every complete checkpoint, oldest first."""
    fs, directory = fsspec.core.url_to_fs(directory_uri)
    if not fs.isdir(directory):
        return []
    found = []
    for path in fs.ls(directory, detail=False):
        match = _NAME.search(path.rsplit("/", 1)[-1])
        if match:
            found.append((int(match.group(1)), path))
    return sorted(found)


def latest_checkpoint(directory_uri: str) -> tuple[int, bytes] | None:
    """``(epoch, payload)`` of the newest checkpoint, or ``None`` when there is none."""
    found = list_checkpoints(directory_uri)
    if not found:
        return None
    epoch, path = found[-1]
    fs, _ = fsspec.core.url_to_fs(directory_uri)
    with fs.open(path, "rb") as f:
        return epoch, f.read()


def prune(directory_uri: str, keep: int) -> None:
    """Deletes all but the ``keep`` newest checkpoints (``keep`` >= 1)."""
    if keep < 1:
        raise InvalidParameterError(f"keep={keep} would delete the checkpoint a restart resumes from")
    fs, _ = fsspec.core.url_to_fs(directory_uri)
    for _, path in list_checkpoints(directory_uri)[:-keep]:
        fs.rm(path)


def to_bytes(save, obj) -> bytes:
    """Serialises ``obj`` with a ``save(obj, file)`` function such as ``torch.save``."""
    buffer = io.BytesIO()
    save(obj, buffer)
    return buffer.getvalue()
