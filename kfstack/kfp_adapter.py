"""Everything kfstack relies on in kfp that kfp does not publish, in one place, checked before use.

kfp's public interfaces cover defining, compiling and running a pipeline (``kfp.dsl``,
``kfp.compiler``, ``kfp.local.init`` with its cache switch). Three things kfstack adds have no
public way in; this module is the only one that touches kfp's internals for them:

- **Task hooks** (:mod:`kfstack.app.local_run`: the live task lines and their progress, each
  task's own log, a task's processes stopped as a group on Ctrl-C, the run-time placeholders
  kfp.local leaves unfilled, ``CACHED`` stages). kfp.local has no hook around a task, so while a
  run lasts three of its functions are wrapped: ``orchestrator.task_executor.execute_single_task``
  (a task, run or answered from the cache; kfstack reads its ``task_spec``),
  ``task_dispatcher.run_single_task_implementation`` (a task that runs; kfstack reads its
  ``component_name`` and may fill its ``arguments``) and
  ``subprocess_task_handler.run_local_subprocess`` (replaced: it starts a task's process).
- **The step cache** (:mod:`kfstack.app.step_cache`). Turning kfp.local's cache on is public
  (``kfp.local.init(enable_caching=True, cache_root=...)``), as are its ``LocalCache.compute_key``,
  ``get`` and ``put``; handing kfp.local a cache of one's own is not: the step cache takes the
  place of kfp's through ``kfp.local.cache``'s private singleton (``_cache_singleton``,
  ``_cache_singleton_root``, ``_cache_singleton_lock``). Restoring an artifact from an entry
  uses ``kfp.dsl.executor.create_artifact_instance``, as kfp's own cache does.
- **The definition fix** (:mod:`kfstack.pipelines.wiring`). Every resource setter of a task
  (``set_cpu_limit``, ``set_memory_request``, ...) first calls
  ``PipelineTask._ensure_container_spec_exists``, which names its caller for an error message
  with ``inspect.stack()``: that builds a frame record for every frame on the stack, finding each
  frame's module among all those loaded and reading its source file. A kfstack pipeline sets pod
  resources on every step (24 calls per definition of the example training pipeline: 2.5 s
  instead of 1.6 s on a 2-core machine, paid by every command that loads a pipeline).
  :func:`cut_definition_cost` replaces the method with one that makes the same check and raises
  the same message, naming the caller from its frame alone.

kfstack also reads kfp's executor log format (:data:`EXECUTOR_LOG_PREFIX`) to sort a task's
output from kfp's own lines; a format it does not recognise only puts kfp's lines in the task's
log.

**Releases.** Checked against kfp 2.17.0 and 2.17.3 (:data:`CHECKED_RELEASES`; their kfp.local
and kfp.dsl are the same code). kfp 2.16 has no ``kfp.local`` cache and no task executor: 2.17.0
is kfstack's floor. Before touching anything for one of the three, the adapter checks that the
release it runs on is a checked one or a later patch release of the same line (2.17.x), and that
the functions are there with the parameters used and the private names exist. Where either
fails it touches nothing, logs one line saying what is lost, and kfp's own behaviour stands:

- no task hooks: the run proceeds as kfp.local runs it, tasks' output in kfp's log, and the
  summary has the run's outcome without stages (a step given KFP's run-time placeholders fails
  there, as it does under kfp.local alone);
- no step cache: kfp.local's cache stays off and every step runs;
- no definition fix: defining a pipeline keeps kfp's ``inspect.stack()`` cost.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import importlib.metadata
import inspect
import logging
import re
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any, Protocol

logger = logging.getLogger(__name__)

CHECKED_RELEASES = ("2.17.0", "2.17.3")
# The release lines the checked releases belong to: a later patch release of one is taken to
# keep its internals (2.17.0 and 2.17.3 differ in their version string only), still shape-checked.
_KNOWN_LINES = frozenset(tuple(int(part) for part in release.split(".")[:2]) for release in CHECKED_RELEASES)
_FINAL_RELEASE = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")

# What kfp's executor logs in a task's process (kfp.dsl.executor_main's logging format): not the
# task's output. "Got executor_input:" is followed by the whole executor input as indented JSON,
# up to a closing brace in the first column.
EXECUTOR_LOG_PREFIX = "[KFP Executor "
EXECUTOR_INPUT_HEADER = "Got executor_input:"

TASK_HOOKS = "task hooks"
STEP_CACHE = "step cache"
DEFINITION_FIX = "definition fix"
# What a run or a definition does without each, for the one line logged.
LOST = {
    TASK_HOOKS: "no live task lines, task logs or stages in the summary, and KFP's run-time "
    "placeholders stay unfilled; kfp.local runs the tasks as it does on its own (their output in "
    "kfp's log)",
    STEP_CACHE: "the step cache is off: every step runs",
    DEFINITION_FIX: "defining a pipeline keeps kfp's inspect.stack() cost per resource setter",
}

_TASK_EXECUTOR = "kfp.local.orchestrator.task_executor"
_TASK_DISPATCHER = "kfp.local.task_dispatcher"
_SUBPROCESS_HANDLER = "kfp.local.subprocess_task_handler"
_LOCAL_CACHE = "kfp.local.cache"
_PIPELINE_TASK = "kfp.dsl.pipeline_task"
_EXECUTOR = "kfp.dsl.executor"
# The functions wrapped or replaced, with the parameters kfstack reads, passes or takes, and
# whether those must be all of them (the replaced one: its stand-in takes exactly these).
_HOOKED: tuple[tuple[str, str, tuple[str, ...], bool], ...] = (
    (_TASK_EXECUTOR, "execute_single_task", ("task_spec",), False),
    (_TASK_DISPATCHER, "run_single_task_implementation", ("component_name", "arguments"), False),
    (_SUBPROCESS_HANDLER, "run_local_subprocess", ("full_command", "env_vars"), True),
)
# kfp.local.cache's names the step cache is handed over with (and taken back by, when refused).
_CACHE_NAMES = (
    "LocalCache",
    "get_local_cache",
    "reset_local_cache_singleton",
    "_cache_singleton",
    "_cache_singleton_root",
    "_cache_singleton_lock",
)

_reported: set[str] = set()  # the features whose loss was logged (once per process)
_kfp_container_spec_check: Any = None  # kfp's own method, once replaced
_definition_lock = threading.Lock()


def kfp_release() -> str:
    """The installed kfp's version, as its distribution says."""
    try:
        return importlib.metadata.version("kfp")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _release_problem() -> str | None:
    release = kfp_release()
    if release in CHECKED_RELEASES:
        return None
    match = _FINAL_RELEASE.match(release)
    if match and (int(match.group(1)), int(match.group(2))) in _KNOWN_LINES:
        return None
    checked = " and ".join(CHECKED_RELEASES)
    lines = " or ".join(f"{major}.{minor}" for major, minor in sorted(_KNOWN_LINES))
    return f"kfp {release} is not a release kfstack knows (checked against {checked}, or a later {lines}.x)"


def _function_problem(
    module_name: str, qualified_name: str, parameters: tuple[str, ...], exact: bool = False
) -> str | None:
    """What is wrong with ``module_name``'s ``qualified_name`` (a function, or a class's method
    as ``Class.method``) for a call with ``parameters``; None: nothing. ``exact``: a function
    kfstack replaces, whose replacement takes exactly these parameters, so it must have no
    other (kfp would pass it one the replacement does not take)."""
    try:
        found: Any = importlib.import_module(module_name)
    except ImportError:
        return f"kfp {kfp_release()} has no {module_name}"
    for part in qualified_name.split("."):
        found = getattr(found, part, None)
    if not callable(found):
        return f"kfp {kfp_release()} has no {module_name}.{qualified_name}"
    try:
        known = inspect.signature(found).parameters
    except (TypeError, ValueError):
        return f"kfp {kfp_release()}'s {module_name}.{qualified_name} has no signature to check"
    missing = [parameter for parameter in parameters if parameter not in known]
    if missing:
        return f"kfp {kfp_release()}'s {module_name}.{qualified_name} has no parameter {', '.join(missing)}"
    others = [parameter for parameter in known if parameter not in parameters]
    if exact and others:
        return f"kfp {kfp_release()}'s {module_name}.{qualified_name} takes {', '.join(others)} too"
    return None


def _names_problem(module_name: str, names: tuple[str, ...]) -> str | None:
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return f"kfp {kfp_release()} has no {module_name}"
    missing = [name for name in names if not hasattr(module, name)]
    if missing:
        return f"kfp {kfp_release()} has no {module_name}.{', '.join(missing)}"
    return None


def _first_problem(*checks: Callable[[], str | None]) -> str | None:
    for check in checks:
        problem = check()
        if problem:
            return problem
    return None


def _usable(feature: str, problem: str | None) -> bool:
    """Whether ``feature`` may touch kfp; if not, says once per process what is lost."""
    if problem is None:
        return True
    if feature not in _reported:
        _reported.add(feature)
        logger.warning("%s: %s", problem, LOST[feature])
    return False


# ---- task hooks ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class TaskResult:
    """What kfp.local made of a task: its outputs (empty when it failed) and whether it succeeded."""

    outputs: dict[str, Any]
    succeeded: bool


class TaskHooks(Protocol):
    """What the embedded runner does around kfp.local's tasks (:func:`task_hooks`)."""

    def execute_task(self, component: str, execute: Callable[[], TaskResult]) -> None:
        """A task, run or answered from the cache: must call ``execute`` once."""

    def run_task(
        self,
        component: str,
        arguments: dict[str, Any],
        run: Callable[[dict[str, Any]], TaskResult],
        image: str = "",
    ) -> None:
        """A task that runs: must call ``run`` once, with its ``arguments`` or others. ``image``:
        its container's image, as compiled (empty where the call does not say)."""

    def run_process(self, full_command: list[str], env_vars: dict[str, str] | None) -> int:
        """Starts a task's process, waits for it and returns its exit code."""


def task_hooks_usable() -> bool:
    """Whether :func:`task_hooks` will put the hooks in place on this kfp (if not, logs once what a
    run lacks)."""
    checks: list[Callable[[], str | None]] = [_release_problem]
    checks += [functools.partial(_function_problem, *hooked) for hooked in _HOOKED]
    # The task executor reaches the dispatcher through its module, so the wrapper is what it calls.
    checks.append(functools.partial(_names_problem, _TASK_EXECUTOR, ("task_dispatcher",)))
    return _usable(TASK_HOOKS, _first_problem(*checks))


def _result(returned: Any) -> TaskResult:
    """kfp's ``(outputs, status)`` as a :class:`TaskResult`. A release that returns another shape
    fails the run here, naming it, rather than have kfstack guess a task's outcome."""
    try:
        outputs, status = returned
    except (TypeError, ValueError) as err:
        raise RuntimeError(
            f"kfp {kfp_release()} returned a task result kfstack does not know "
            f"({type(returned).__name__}, not (outputs, status))"
        ) from err
    return TaskResult(dict(outputs or {}), getattr(status, "name", None) == "SUCCESS")


def _component(bound: inspect.BoundArguments, read: Callable[[Any], str], unknown: str = "task") -> str:
    try:
        return read(bound.arguments)
    except (KeyError, AttributeError, TypeError):
        return unknown  # a name is for display: a call of another form still runs


@contextlib.contextmanager
def task_hooks(hooks: TaskHooks) -> Iterator[bool]:
    """Puts ``hooks`` around kfp.local's tasks while the block lasts; yields whether they are in
    place (False: :func:`task_hooks_usable` said why, and kfp.local runs as it does alone)."""
    if not task_hooks_usable():
        yield False
        return
    from kfp.local import subprocess_task_handler, task_dispatcher
    from kfp.local.orchestrator import task_executor

    execute_task = task_executor.execute_single_task
    run_task = task_dispatcher.run_single_task_implementation
    run_process = subprocess_task_handler.run_local_subprocess
    execute_signature = inspect.signature(execute_task)
    run_signature = inspect.signature(run_task)

    def execute_task_hooked(*args: Any, **kwargs: Any) -> Any:
        bound = execute_signature.bind(*args, **kwargs)
        returned: list[Any] = []

        def execute() -> TaskResult:
            returned.append(execute_task(*bound.args, **bound.kwargs))
            return _result(returned[-1])

        hooks.execute_task(_component(bound, lambda call: call["task_spec"].component_ref.name), execute)
        return returned[-1]

    def run_task_hooked(*args: Any, **kwargs: Any) -> Any:
        bound = run_signature.bind(*args, **kwargs)
        returned: list[Any] = []
        given = bound.arguments.get("arguments")

        def run(arguments: dict[str, Any]) -> TaskResult:
            if isinstance(given, dict):
                bound.arguments["arguments"] = arguments
            returned.append(run_task(*bound.args, **bound.kwargs))
            return _result(returned[-1])

        component = _component(bound, lambda call: str(call["component_name"]))
        image = _component(bound, lambda call: str(call["executor_spec"].container.image), unknown="")
        hooks.run_task(component, dict(given) if isinstance(given, dict) else {}, run, image=image)
        return returned[-1]

    def run_process_hooked(full_command: list[str], env_vars: dict[str, str] | None = None) -> int:
        return hooks.run_process(full_command, env_vars)

    task_executor.execute_single_task = execute_task_hooked
    task_dispatcher.run_single_task_implementation = run_task_hooked
    subprocess_task_handler.run_local_subprocess = run_process_hooked
    try:
        yield True
    finally:
        task_executor.execute_single_task = execute_task
        task_dispatcher.run_single_task_implementation = run_task
        subprocess_task_handler.run_local_subprocess = run_process


# ---- step cache -----------------------------------------------------------------------------


_KEY_PARAMETERS = ("component_name", "image", "full_command", "arguments", "env_vars", "custom_cache_key")


def step_cache_usable() -> bool:
    """Whether a step cache can take the place of kfp.local's (if not, logs once that it is off).
    Asked before ``kfp.local.init(enable_caching=...)``: without it the cache stays off."""
    return _usable(
        STEP_CACHE,
        _first_problem(
            _release_problem,
            lambda: _function_problem("kfp.local", "init", ("enable_caching", "cache_root")),
            lambda: _names_problem(_LOCAL_CACHE, _CACHE_NAMES),
            lambda: _function_problem(_LOCAL_CACHE, "LocalCache.compute_key", _KEY_PARAMETERS),
            # The task executor asks the cache module for the cache at each task.
            lambda: _names_problem(_TASK_EXECUTOR, ("cache_module",)),
            lambda: _function_problem(_EXECUTOR, "create_artifact_instance", ("runtime_artifact",)),
        ),
    )


def kfp_cache(cache_root: str) -> Any:
    """kfp.local's own cache under ``cache_root``, whose key (``compute_key``) a step cache extends."""
    from kfp.local import cache

    return cache.LocalCache(cache_root)


def install_step_cache(step_cache: Any) -> bool:
    """Makes ``step_cache`` (``compute_key``, ``get``, ``put`` and ``cache_root`` as kfp's
    ``LocalCache`` has them) the one kfp.local consults, after ``kfp.local.init(enable_caching=True,
    cache_root=step_cache.cache_root)`` (which drops kfp's: it makes a plain one on first use).

    Returns whether kfp.local now answers with it; if not (logged once), the caller turns kfp's
    cache off again.
    """
    if not step_cache_usable():
        return False
    from kfp.local import cache

    with cache._cache_singleton_lock:
        cache._cache_singleton = step_cache
        cache._cache_singleton_root = step_cache.cache_root
    if cache.get_local_cache() is step_cache:
        return True
    cache.reset_local_cache_singleton()
    return _usable(STEP_CACHE, f"kfp {kfp_release()}'s kfp.local.cache does not keep a cache handed to it")


def artifact(schema_title: str, name: str, uri: str, metadata: dict[str, Any]) -> Any:
    """An output artifact of the ``dsl`` class its schema title names, as kfp.local hands it on."""
    from kfp.dsl import executor

    return executor.create_artifact_instance(
        {"name": name, "uri": uri, "metadata": metadata, "type": {"schemaTitle": schema_title}}
    )


# ---- definition fix -------------------------------------------------------------------------


def ensure_container_spec_exists(self: Any) -> None:
    """kfp's check, naming its caller from the caller's frame instead of ``inspect.stack()``."""
    if self.container_spec is None:
        caller = sys._getframe(1).f_code.co_name
        raise ValueError(
            f"{caller} can only be used on single-step components, not pipelines used as components, "
            "or special components like importers."
        )


def cut_definition_cost() -> bool:
    """Puts :func:`ensure_container_spec_exists` in place of kfp's method (idempotent); returns
    whether it is in place (if not, logs once that the cost stays)."""
    global _kfp_container_spec_check
    problem = _first_problem(
        _release_problem,
        lambda: _function_problem(_PIPELINE_TASK, "PipelineTask._ensure_container_spec_exists", ("self",)),
    )
    if not _usable(DEFINITION_FIX, problem):
        return False
    from kfp.dsl import pipeline_task

    with _definition_lock:
        current = pipeline_task.PipelineTask._ensure_container_spec_exists
        if current is not ensure_container_spec_exists:
            _kfp_container_spec_check = current
            pipeline_task.PipelineTask._ensure_container_spec_exists = ensure_container_spec_exists
    return True


def kfp_container_spec_check() -> Any:
    """kfp's own method (the one in place until :func:`cut_definition_cost`), for the test that
    holds the two to the same behaviour."""
    if _kfp_container_spec_check is not None:
        return _kfp_container_spec_check
    from kfp.dsl import pipeline_task

    return pipeline_task.PipelineTask._ensure_container_spec_exists
