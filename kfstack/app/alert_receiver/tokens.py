"""Bearer tokens kept in files: the webhook's (a mounted Secret) and the KFP API's (a projected
service-account token). Both are read at each use, never kept: a rotated Secret, or a projected
token the kubelet renews before it expires, takes effect without a restart."""

from __future__ import annotations

from kfstack.errors import UsageError


def read_token(path: str, flag: str = "--token-file") -> str:
    """The bearer token in file ``path`` (surrounding whitespace dropped).

    Raises:
        UsageError: The file cannot be read or is empty (the message names ``flag``).
    """
    try:
        with open(path, encoding="utf-8") as f:
            token = f.read().strip()
    except OSError as err:
        raise UsageError(f"{flag} {path}: {err.strerror or err}") from None
    if not token:
        raise UsageError(f"{flag} {path}: the file is empty")
    return token
