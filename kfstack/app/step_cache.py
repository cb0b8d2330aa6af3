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

- **The code a step runs is part of its key.** On a cluster a change of code is a new image;
  here the code runs from this environment, so a step's key also holds a digest of
  (:class:`StepCode`): this interpreter and kfstack's sources, in every key; the package the
  pipeline is registered from, its non-Python files in every key (data, configuration: what
  they touch cannot be told, so a change reruns every step) and of its Python modules those the
  step runs -- the modules its arguments name (a Spark application ``pkg.job``, training code
  ``pkg.train:main``, a predictor ``pkg.server:Model``) and those its command's source imports,
  each with its import closure inside the package, found statically (``ast``: nothing of the
  team's is imported, so a module that fails to import, or starts a framework when imported,
  costs the key nothing; the closure also takes a module the code names as a string,
  ``"pkg.mod:function"``). Editing the training code reruns training and what follows it,
  not the Spark step. Imports the code makes by a computed name cannot be seen: a module
  named nowhere else runs with no key of its own, and such a change needs ``--no-cache``.
- **What a step reads from this machine is part of its key**: the content of every existing file
  a task's command or arguments name (a Spark application given as a file), and of every local
  folder an argument names (the Spark step's input folder) the name, size, modification and
  change time of each file in it. Not their content: reading it costs time in every run that
  grows with the data (measured: 34 ms for 11 MB of zipped tables, 67 ms for the same 34 MB as
  CSV; a folder of 10 GB would take many seconds), where a file's times cost the same for any
  size and change whenever it is written -- its change time also when it is copied with its old
  modification time kept (``cp -p``, ``rsync -a``), which a process cannot set back. A file
  whose times changed but not its content runs the step again, the safe way. Artifacts are
  keyed by their URI, as a cluster keys them, and folders of the runs under the pipeline root
  are not read.
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

import ast
import functools
import glob
import hashlib
import importlib.util
import json
import os
import re
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable
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

    def __init__(self, run: RunDirectory, code: StepCode | str) -> None:
        """``code``: the code the run's steps execute (a fixed digest: the same code for all)."""
        self.cache_root = os.path.join(run.path, CACHE_DIR)
        self._run = run
        self._code = code
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
        strings = [*full_command, *_strings(arguments)]
        code = self._code if isinstance(self._code, str) else self._code.digest(strings)
        # An artifact is keyed by its URI (above); a folder an argument names is read, but not
        # the runs' own (their outputs change with every run that writes them).
        named = _named_files(strings)
        folders = _folders_digest(_parameter_strings(arguments), os.path.dirname(self._run.path))
        key = hashlib.sha256(f"{kfp_key}\0{code}\0{named}\0{folders}".encode())
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


def _parameter_strings(arguments: dict[str, Any]) -> Iterable[str]:
    """The strings of the arguments that are parameters (artifacts are keyed by their URI)."""
    for value in arguments.values():
        if isinstance(value, dsl.Artifact) or (
            isinstance(value, list) and value and isinstance(value[0], dsl.Artifact)
        ):
            continue
        yield from _strings(value)


def _folders_digest(strings: Iterable[str], pipeline_root: str) -> str:
    """A digest of the existing local folders the strings name, outside ``pipeline_root``: each
    file's path in it, size, modification and change time (the module docstring says why not
    its content)."""
    root = os.path.realpath(pipeline_root)
    digest = hashlib.sha256()
    for text in sorted(set(strings)):
        path = text.removeprefix("local://").removeprefix("file://")
        if not path or len(path) > _PATH_MAX or "\n" in path or not os.path.isdir(path):
            continue
        real = os.path.realpath(path)
        if real == root or real.startswith(root + os.sep):
            continue  # a run's folder: its outputs change with every run that writes them
        digest.update(f"{path}\0".encode())
        for folder, subfolders, files in os.walk(path, followlinks=True):
            subfolders.sort()
            for name in sorted(files):
                file = os.path.join(folder, name)
                try:
                    stat = os.stat(file)
                except OSError as err:
                    digest.update(f"{file}: {err}\0".encode())
                    continue
                times = f"{stat.st_size}\0{stat.st_mtime_ns}\0{stat.st_ctime_ns}"
                digest.update(f"{os.path.relpath(file, path)}\0{times}\0".encode())
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


class StepCode:
    """The code each step of a run of ``pipeline_function`` (``module:function``) executes, as its
    key holds it (the module docstring says what it covers and why).

    A file is read once per run (the same content for every step of it, as a cluster run has one
    image): digests and import closures are kept in this object.
    """

    def __init__(self, pipeline_function: str) -> None:
        self.team = _package_of(pipeline_function)
        locations = _package_folders(self.team) if self.team != "kfstack" else []
        self._folders = [folder for folder in locations if os.path.isdir(folder)]
        self._reference = re.compile(rf"\b{re.escape(self.team)}(?:\.\w+)+(?::\w+)?")
        self._imports = re.compile(rf"^\s*(?:from|import)\s+({re.escape(self.team)}(?:\.\w+)*)", re.MULTILINE)
        self._files: dict[str, str] = {}  # file -> its digest
        self._closures: dict[str, frozenset[str]] = {}  # file -> the module files it runs
        digest = hashlib.sha256(f"{sys.executable}\0{sys.version}".encode())
        for folder in _package_folders("kfstack"):
            digest.update(_tree_digest(folder).encode())
        # A package of one module file: that file is every step's code.
        for location in locations:
            if os.path.isfile(location):
                digest.update(_file_digest(location).encode())
        for folder in self._folders:
            digest.update(_tree_digest(folder, lambda name: not name.endswith(".py")).encode())
        self._shared = digest.hexdigest()

    def digest(self, strings: Iterable[str]) -> str:
        """The digest of a step's code, from the strings of its command and arguments."""
        files: set[str] = set()
        for module in sorted(self._named_modules(strings)):
            for path in self._module_files(module, run=True):
                files |= self._closure(path)
        digest = hashlib.sha256(self._shared.encode())
        for path in sorted(files):
            digest.update(f"\0{path}\0{self._file_digest(path)}".encode())
        return digest.hexdigest()

    def _named_modules(self, strings: Iterable[str]) -> set[str]:
        """The team's modules the strings name: a reference (``pkg.mod``, ``pkg.mod:attr``), an
        import in a component's source (its command), or a module file of the package by path."""
        named: set[str] = set()
        for text in strings:
            if "\n" in text:  # a component's source: what it imports
                named.update(self._imports.findall(text))
                continue
            if len(text) > _PATH_MAX:
                continue
            named.update(reference.partition(":")[0] for reference in self._reference.findall(text))
            path = text.removeprefix("local://")
            module = self._module_of(path) if path.endswith(".py") and os.path.isfile(path) else None
            if module:
                named.add(module)
        return named

    def _module_of(self, path: str) -> str | None:
        """The dotted name of a module file of the package, or None for a file outside it."""
        # As named first (a module in a linked folder of the package), then with links resolved.
        for resolve in (os.path.abspath, os.path.realpath):
            for folder in self._folders:
                relative = os.path.relpath(resolve(path), resolve(folder))
                if not relative.startswith(os.pardir):
                    parts = relative.removesuffix(".py").split(os.sep)
                    return ".".join([self.team, *(p for p in parts if p not in ("__init__", "__main__"))])
        return None

    def _module_files(self, module: str, run: bool = False) -> list[str]:
        """The files importing ``module`` executes: its own (a package's ``__init__.py``, and its
        ``__main__.py`` when it is ``run`` as ``python -m`` runs it) and its parent packages'
        ``__init__.py``. A name of no module file is taken for an attribute of the module before
        it (``pkg.train.main``)."""
        parts = module.split(".")[1:]
        names = ("__init__.py", "__main__.py") if run else ("__init__.py",)
        while True:
            own = [
                path
                for folder in self._folders
                for base in [os.path.join(folder, *parts)]
                for path in (f"{base}.py", *(os.path.join(base, name) for name in names))
                if os.path.isfile(path)
            ]
            if own or len(parts) <= 1:
                break
            parts = parts[:-1]
        parents = [
            path
            for folder in self._folders
            for depth in range(len(parts))
            for path in [os.path.join(folder, *parts[:depth], "__init__.py")]
            if os.path.isfile(path)
        ]
        return parents + own

    def _closure(self, path: str) -> frozenset[str]:
        """``path`` and every module file of the package it imports or names, transitively."""
        if path in self._closures:
            return self._closures[path]
        seen: set[str] = set()
        todo = [path]
        while todo:
            current = todo.pop()
            if current in seen:
                continue
            seen.add(current)
            for module in self._imported(current):
                todo += self._module_files(module)
        closure = frozenset(seen)
        self._closures[path] = closure
        return closure

    def _imported(self, path: str) -> set[str]:
        """The team's modules a module file imports or names as a string (``"pkg.mod:name"``).

        A file that does not parse imports what cannot be told: every module of the package
        (when unsure, the step runs again).
        """
        try:
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read(), filename=path)
        except (OSError, SyntaxError, ValueError):
            return {module for folder in self._folders for module in self._all_modules(folder)}
        package = self._module_of(path) or self.team
        if not path.endswith(("__init__.py", "__main__.py")):  # a module: its package
            package = package.rpartition(".")[0]
        found: set[str] = set()
        # A docstring names modules for a reader, not code that runs.
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and node.body
            and isinstance(node.body[0], ast.Expr)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the package this module is in
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, *([base] if base else [])])
                found.add(base)
                found.update(f"{base}.{alias.name}" for alias in node.names)  # a submodule, if one
            elif (
                isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
            ):
                found.update(self._named_by(node.value))
        return {module for module in found if module == self.team or module.startswith(f"{self.team}.")}

    def _named_by(self, text: str) -> set[str]:
        """The module a string constant names, when the whole string is a reference to one
        (``"pkg.train:main"``): a message that mentions a module names no code."""
        return {text.partition(":")[0]} if self._reference.fullmatch(text) else set()

    def _all_modules(self, folder: str) -> set[str]:
        modules = set()
        for current, subfolders, files in os.walk(folder, followlinks=True):
            subfolders[:] = [d for d in subfolders if d != "__pycache__"]
            for name in files:
                if name.endswith(".py"):
                    module = self._module_of(os.path.join(current, name))
                    if module:
                        modules.add(module)
        return modules

    def _file_digest(self, path: str) -> str:
        if path not in self._files:
            self._files[path] = _file_digest(path)
        return self._files[path]


def _package_of(pipeline_function: str) -> str:
    """The top-level package of ``module:function``."""
    return pipeline_function.split(":")[0].split(".")[0]


def _package_folders(package: str) -> list[str]:
    spec = importlib.util.find_spec(package)
    if spec is None:
        return []
    if spec.submodule_search_locations:
        return sorted(spec.submodule_search_locations)
    return [spec.origin] if spec.origin else []  # a module of one file


def _tree_digest(top: str, taken: Callable[[str], bool] = lambda name: True) -> str:
    """Names and contents of every file under ``top`` whose name is ``taken`` (compiled bytecode
    left out), through linked folders too (kfstack's own ``components/`` and ``pipelines/`` are
    links in a checkout)."""
    if os.path.isfile(top):
        return _file_digest(top)
    digest = hashlib.sha256()
    for folder, subfolders, files in os.walk(top, followlinks=True):
        subfolders[:] = sorted(d for d in subfolders if d != "__pycache__")
        for name in sorted(files):
            if not taken(name):
                continue
            path = os.path.join(folder, name)
            digest.update(os.path.relpath(path, top).encode())
            digest.update(_file_digest(path).encode())
    return digest.hexdigest()
