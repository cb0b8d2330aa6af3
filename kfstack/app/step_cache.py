"""Steps not run again when nothing they depend on changed: KFP's cache, on the embedded platform.

On a cluster, KFP answers a task from its cache when the same component ran before with the same
inputs: the earlier outputs become the task's, and the UI shows the task as cached. kfp.local
2.17 has the same mechanism (``kfp.local.cache.LocalCache``, off by default): a task whose
caching is on (kfstack turns it off where a result changes between runs with the same inputs:
:func:`pipelines.wiring.uncached`) is keyed by its component, image, command, container
environment and arguments, input artifacts by their URI and metadata, as a cluster keys them.
kfp.local asks its cache ``compute_key``, ``get`` and ``put``; :class:`StepCache` answers the
same calls, and :mod:`kfstack.kfp_adapter` hands it to kfp.local in place of kfp's own (there is
no public way to), on the kfp releases it knows; on another the step cache is off.

This module makes that cache kfstack's, for what a cluster has and this machine lacks:

- **The code is part of the key.** On a cluster a change of code is a new image; here the code
  runs from this environment, so the key also holds a digest of kfstack's sources, of the
  sources of the package the pipeline is registered from (the team's Spark application,
  training code and predictor), and of every existing file a task's command or arguments name
  (a Spark application given as a file). Editing any of them reruns the steps that use them.
- **Entries live in the run that computed them**, in ``<run_dir>/step-cache/``, and a lookup
  searches every run under the same pipeline root. ``kfstack clean`` removing a run removes
  its entries with it: a later run computes those steps again.
- **What is reused is held.** A run reusing an earlier run's outputs holds a shared lock of
  that run's lock file until it ends (:func:`run_directory.hold_for_reuse`); ``kfstack clean``
  skips a run so held. An earlier run still running is not reused from (its outputs may not be
  final, and nothing could hold them once it ends).
- **The summary says so**: the task's stage is ``CACHED``, with the run its outputs came from.

``kfstack run --local --no-cache`` turns the cache off for one run: every step runs, and its
entries are not written either.
"""

from __future__ import annotations

import functools
import glob
import hashlib
import importlib.util
import json
import os
import sys
import tempfile
import threading
from collections.abc import Iterable
from typing import Any

from kfp import dsl

from kfstack import kfp_adapter
from kfstack.app import run_directory
from kfstack.app.run_directory import RunDirectory

CACHE_DIR = "step-cache"
# An entry: the outputs, and the artifacts that were on disk.
_OUTPUTS, _FILES = "outputs", "files"
# An artifact in an entry's outputs, and a list of them: the form kfp's own cache writes, kept
# so that the entries of earlier kfstack releases (which wrote through kfp's) still read.
_ARTIFACT, _ARTIFACT_LIST = "__kfp_artifact__", "__kfp_artifact_list__"
# A string longer than this in a command or an argument is data, not a file's path.
_PATH_MAX = 4096


class StepCache:
    """kfp.local's cache with kfstack's key and places (see the module docstring): kfp.local asks
    it ``compute_key``, ``get`` and ``put``, as it asks its own ``LocalCache``."""

    def __init__(self, run: RunDirectory, code_digest: str) -> None:
        self.cache_root = os.path.join(run.path, CACHE_DIR)
        self._run = run
        self._code_digest = code_digest
        self._kfp_cache: Any = None  # kfp's own, for its key; made at the first one
        self._hit = threading.local()  # the earlier run a task's outputs came from, per thread
        self._held: dict[str, int] = {}  # earlier run directory -> descriptor holding it
        self._held_lock = threading.Lock()

    def compute_key(
        self,
        component_name: str,
        image: str,
        full_command: list[str],
        arguments: dict[str, Any],
        env_vars: dict[str, str] | None = None,
        custom_cache_key: str | None = None,
    ) -> str:
        if self._kfp_cache is None:
            self._kfp_cache = kfp_adapter.kfp_cache(self.cache_root)
        kfp_key = self._kfp_cache.compute_key(
            component_name=component_name,
            image=image,
            full_command=full_command,
            arguments=arguments,
            env_vars=env_vars,
            custom_cache_key=custom_cache_key,
        )
        named = _named_files([*full_command, *_strings(arguments)])
        key = hashlib.sha256(f"{kfp_key}\0{self._code_digest}\0{named}".encode())
        return key.hexdigest()

    def put(self, key: str, outputs: dict[str, Any]) -> None:
        """Records the step's outputs and which of its artifacts were files or folders.

        kfp's own entry counts an artifact whose URI does not exist as removed, a miss; but a
        Metrics or reference artifact is metadata and never has a file, so a step with one would
        never be answered. The entry lists what existed; a lookup requires exactly that.
        """
        entry = {
            _OUTPUTS: {name: _serialised(value) for name, value in outputs.items()},
            _FILES: sorted(uri for uri in _artifact_uris(outputs) if os.path.exists(uri)),
        }
        os.makedirs(self.cache_root, exist_ok=True)
        fd, partial = tempfile.mkstemp(prefix=".partial-", suffix=".json", dir=self.cache_root)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(entry, f)
        os.replace(partial, os.path.join(self.cache_root, f"{key}.json"))  # whole or not at all

    def get(self, key: str) -> dict[str, Any] | None:
        """The outputs of the newest run whose step had this key and whose files still exist,
        that run held for reuse; None when there is none."""
        for path in _entries(os.path.dirname(self._run.path), key):
            origin = RunDirectory(os.path.dirname(os.path.dirname(path)))
            held_before = origin.path in self._held
            if origin.path != self._run.path and not self._hold(origin):
                continue  # running, or being cleaned
            outputs = None
            try:
                with open(path, encoding="utf-8") as f:
                    entry = json.load(f)
                if all(os.path.exists(uri) for uri in entry[_FILES]):
                    outputs = {name: _restored(value) for name, value in entry[_OUTPUTS].items()}
            except (OSError, ValueError, KeyError, TypeError):
                pass  # unreadable: half written, or of another form
            if outputs is None:  # ... or an output was removed by hand: the step runs
                if not held_before:
                    self._let_go(origin)  # nothing of it is reused: clean may remove it
                continue
            self._hit.origin = origin.path
            return outputs
        return None

    def take_hit(self) -> str | None:
        """The run whose outputs this thread's last lookup returned (then forgotten), or None."""
        origin: str | None = getattr(self._hit, "origin", None)
        self._hit.origin = None
        return origin

    def _hold(self, origin: RunDirectory) -> bool:
        with self._held_lock:
            if origin.path in self._held:
                return True
            fd = run_directory.hold_for_reuse(origin)
            if fd is None:
                return False
            self._held[origin.path] = fd
            return True

    def _let_go(self, origin: RunDirectory) -> None:
        with self._held_lock:
            fd = self._held.pop(origin.path, None)
        if fd is not None:
            os.close(fd)

    def release(self) -> None:
        """Lets go of the earlier runs this run reused (it has ended)."""
        with self._held_lock:
            for fd in self._held.values():
                os.close(fd)
            self._held.clear()


def _artifact_uris(outputs: dict[str, Any]) -> Iterable[str]:
    for value in outputs.values():
        for artifact in value if isinstance(value, list) else [value]:
            if isinstance(artifact, dsl.Artifact) and artifact.uri:
                yield artifact.uri


def _serialised(value: Any) -> Any:
    """An output as an entry keeps it: an artifact (or a list of them) by its fields, a parameter
    as it is."""
    if isinstance(value, dsl.Artifact):
        return {
            _ARTIFACT: True,
            "schema_title": type(value).schema_title,
            "schema_version": type(value).schema_version,
            "name": value.name,
            "uri": value.uri,
            "metadata": value.metadata,
        }
    if isinstance(value, list) and value and isinstance(value[0], dsl.Artifact):
        return {_ARTIFACT_LIST: True, "artifacts": [_serialised(artifact) for artifact in value]}
    return value


def _restored(value: Any) -> Any:
    """An output as kfp.local hands it on, from its entry (as kfp's own cache restores it, the
    existence of its files checked by the caller)."""
    if isinstance(value, dict) and value.get(_ARTIFACT_LIST):
        return [_restored(artifact) for artifact in value.get("artifacts", [])]
    if not (isinstance(value, dict) and value.get(_ARTIFACT)):
        return value
    return kfp_adapter.artifact(
        value.get("schema_title", "system.Artifact"),
        value.get("name", ""),
        value.get("uri", ""),
        value.get("metadata") or {},
    )


def install(cache: StepCache) -> bool:
    """Makes ``cache`` the one kfp.local consults, after ``kfp.local.init(enable_caching=True,
    cache_root=cache.cache_root)``; False where this kfp does not allow it (then logged, and the
    caller turns kfp's cache off)."""
    return kfp_adapter.install_step_cache(cache)


def _entries(pipeline_root: str, key: str) -> list[str]:
    """The cache entries with ``key`` under ``pipeline_root``'s runs, newest first."""
    found = glob.glob(os.path.join(glob.escape(pipeline_root), "*", CACHE_DIR, f"{key}.json"))
    return sorted(found, key=_mtime, reverse=True)


def _mtime(path: str) -> float:
    try:
        return os.path.getmtime(path)
    except OSError:
        return 0.0


def _strings(value: Any) -> Iterable[str]:
    """Every string in an argument value (artifacts by their URI)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)
    elif hasattr(value, "uri"):
        yield str(value.uri)


def _named_files(strings: Iterable[str]) -> str:
    """A digest of the existing regular files the strings name (``local://`` included)."""
    digest = hashlib.sha256()
    for text in sorted(set(strings)):
        path = text.removeprefix("local://")
        if not path or len(path) > _PATH_MAX or "\n" in path or not os.path.isfile(path):
            continue
        digest.update(path.encode())
        digest.update(_file_digest(path).encode())
    return digest.hexdigest()


def _file_digest(path: str) -> str:
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for block in iter(functools.partial(f.read, 1 << 20), b""):
                digest.update(block)
    except OSError as err:
        digest.update(f"unreadable: {err}".encode())
    return digest.hexdigest()


def code_digest(pipeline_function: str) -> str:
    """A digest of the code a run's steps execute here: kfstack's sources, the sources of the
    package ``pipeline_function`` (``module:function``) belongs to, and this interpreter."""
    digest = hashlib.sha256(f"{sys.executable}\0{sys.version}".encode())
    team = pipeline_function.split(":")[0].split(".")[0]
    for package in sorted({"kfstack", team}):
        for folder in _package_folders(package):
            digest.update(_tree_digest(folder).encode())
    return digest.hexdigest()


def _package_folders(package: str) -> list[str]:
    spec = importlib.util.find_spec(package)
    if spec is None:
        return []
    if spec.submodule_search_locations:
        return sorted(spec.submodule_search_locations)
    return [spec.origin] if spec.origin else []  # a module of one file


def _tree_digest(top: str) -> str:
    """Names and contents of every file under ``top`` (compiled bytecode left out), through
    linked folders too (kfstack's own ``components/`` and ``pipelines/`` are links in a checkout)."""
    if os.path.isfile(top):
        return _file_digest(top)
    digest = hashlib.sha256()
    for folder, subfolders, files in os.walk(top, followlinks=True):
        subfolders[:] = sorted(d for d in subfolders if d != "__pycache__")
        for name in sorted(files):
            path = os.path.join(folder, name)
            digest.update(os.path.relpath(path, top).encode())
            digest.update(_file_digest(path).encode())
    return digest.hexdigest()
