"""The embedded platform's model registry: which model version is in production, and since when.

On Kubernetes "production" is the InferenceService itself; locally it is this record, so that a
second local run has something to canary against::

    <root>/<model name>/
        production.json     the model in production: version, its directory, since, run
        history.jsonl       every rollout decision, appended (first, promoted, rolled_back)
        models/<version>/   the model directories that have served (copied: run directories
                            are cleaned, production must outlive them)

Every change holds an exclusive lock on ``<root>/<model name>/.lock`` (two runs finishing at
once serialise), and ``production.json`` is replaced atomically (written beside, then
``os.replace``): a reader sees the old record or the new one, never half of one. Promote writes
the model's copy first, then production, then history; a crash between them leaves production
consistent (history then lacks its last line).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import re
import shutil
from collections.abc import Iterator
from typing import Any

from kfstack.errors import InvalidParameterError, RunFailedError
from kfstack.lineage import now

# Set by the embedded runner in every task process: the registry's root (beside the runs, so
# that it outlives them).
REGISTRY_DIR_ENV = "KFSTACK_REGISTRY_DIR"
PRODUCTION_FILE = "production.json"
HISTORY_FILE = "history.jsonl"
MODELS_DIR = "models"
FIRST = "first"
PROMOTED = "promoted"
ROLLED_BACK = "rolled_back"
_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")
# promote(replacing=...) without a condition.
ANY_VERSION = object()


class ProductionChangedError(RunFailedError):
    """Another rollout changed production between a comparison and its promotion."""


@dataclasses.dataclass(frozen=True)
class ProductionRecord:
    """The model in production."""

    version: str
    model_dir: str
    since: str
    run_id: str

    def to_dict(self) -> dict[str, str]:
        return dataclasses.asdict(self)


class LocalRegistry:
    """One model name's production record and history under ``root`` (see the module docstring)."""

    def __init__(self, root: str, model_name: str) -> None:
        if not _SAFE.match(model_name):
            raise InvalidParameterError(f"model name {model_name!r}: letters, digits and . _ + - only")
        self.path = os.path.join(os.path.abspath(root), model_name)
        self.model_name = model_name

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        os.makedirs(self.path, exist_ok=True)
        with open(os.path.join(self.path, ".lock"), "w", encoding="utf-8") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def production(self) -> ProductionRecord | None:
        """The model in production, or None before the first rollout."""
        path = os.path.join(self.path, PRODUCTION_FILE)
        if not os.path.exists(path):
            return None
        with open(path, encoding="utf-8") as f:
            return ProductionRecord(**json.load(f))

    def history(self) -> list[dict[str, Any]]:
        """Every decision, oldest first."""
        path = os.path.join(self.path, HISTORY_FILE)
        if not os.path.exists(path):
            return []
        with open(path, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]

    def promote(
        self,
        model_dir: str,
        version: str,
        run_id: str,
        details: dict[str, Any] | None = None,
        replacing: str | object | None = ANY_VERSION,
    ) -> ProductionRecord:
        """Puts ``model_dir`` in production as ``version`` (first rollout or a promoted canary).

        Args:
            replacing: The version the caller compared against (None: it found nothing in
                production): the promotion happens only if that is still production, so two
                runs deciding at once never replace a model neither compared with.

        Raises:
            InvalidParameterError: A version that is not a safe directory name, or one the
                registry already holds.
            ProductionChangedError: Production is no longer ``replacing``.
        """
        if not _SAFE.match(version):
            raise InvalidParameterError(f"model version {version!r}: letters, digits and . _ + - only")
        with self._locked():
            previous = self.production()
            current = previous.version if previous else None
            if replacing is not ANY_VERSION and replacing != current:
                raise ProductionChangedError(
                    f"{self.model_name}: production is {current} now, not {replacing} as when {version} "
                    f"was compared with it; {version} was not promoted"
                )
            target = os.path.join(self.path, MODELS_DIR, version)
            if os.path.isdir(target):
                # A version names one model for good: promoting another under it would put the
                # old copy in production.
                raise InvalidParameterError(f"model version {version} is already in the registry ({target})")
            staging = f"{target}.partial"
            shutil.rmtree(staging, ignore_errors=True)
            shutil.copytree(model_dir, staging)
            os.replace(staging, target)
            record = ProductionRecord(version=version, model_dir=target, since=now(), run_id=run_id)
            temporary = os.path.join(self.path, f".{PRODUCTION_FILE}.{os.getpid()}")
            with open(temporary, "w", encoding="utf-8") as f:
                json.dump(record.to_dict(), f, indent=2)
                f.flush()
                os.fsync(f.fileno())
            os.replace(temporary, os.path.join(self.path, PRODUCTION_FILE))
            event = FIRST if previous is None else PROMOTED
            self._append(
                event,
                version,
                run_id,
                {"previous": previous.version if previous else None, **(details or {})},
            )
            return record

    def record_rollback(self, version: str, run_id: str, details: dict[str, Any] | None = None) -> None:
        """Notes that the canary ``version`` was rolled back; production stays as it is."""
        with self._locked():
            production = self.production()
            self._append(
                ROLLED_BACK,
                version,
                run_id,
                {"production": production.version if production else None, **(details or {})},
            )

    def _append(self, event: str, version: str, run_id: str, details: dict[str, Any]) -> None:
        entry = {"event": event, "version": version, "run_id": run_id, "at": now(), **details}
        with open(os.path.join(self.path, HISTORY_FILE), "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")
