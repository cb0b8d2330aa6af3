"""The public contracts between kfstack's generic components and a team's own code.

One module, so that a team reads one page (``docs/contracts.md``) and kfstack checks one set of
rules at every edge. A team's code never needs to import kfstack
(docs/architecture.md#a-teams-code-never-imports-kfstack): it learns where things are from
environment variables, takes its hyperparameters as ``--name=value`` arguments, prints its metrics
as Katib's StdOut collector reads them (``name=value``), and writes plain files. kfstack's wrappers
(:mod:`kfstack.spark.driver`, :mod:`kfstack.training.entrypoint`) set the variables up, run the
code, then move what it wrote to where the pipeline's artifacts live.

**Where things are** (environment variables, the way Vertex AI hands ``AIP_MODEL_DIR`` over):

===========================  =============================================================
``KFSTACK_INPUT_URI``        the step's input dataset, a URI the code opens itself (a local
                             path on the embedded platform, ``s3://`` on a cluster, ``s3a://``
                             for a Spark job); unset when the step has none
``KFSTACK_OUTPUT_URI``       Spark job: where the application writes its dataset (a URI as
                             Spark opens it)
``KFSTACK_MODEL_DIR``        training: a local directory; rank 0 writes the model there and
                             the wrapper moves it to the model artifact once the code returns
``KFSTACK_CHECKPOINT_URI``   training: a URI that outlives a replica (checkpoints; a restarted
                             or preempted job resumes from it)
``KFSTACK_REPORT_PATH``      a local file the code may write a small JSON object of numbers
                             to (rows read, written, quarantined...): it becomes the step's
                             Metrics
===========================  =============================================================

Secrets (database or feature-store credentials) are passed by *name*: Secrets whose keys
become the pods' environment on a cluster; on the embedded platform the processes inherit the
launching process's environment. Never a value in a parameter.

**Training code**: ``package.module`` (run as ``python -m``) or ``package.module:function`` (called
with the hyperparameters as keyword arguments converted to its declared types, or, when its first
parameter is named ``argv``, with them as a command line). The pipeline declares the
hyperparameters (name and type), the metric names the code prints and how its options are spelled
as data, :class:`TrainingCode`, readable without importing the code.

**Models**: a directory plus a declared format (:data:`MODEL_FORMATS`);
:func:`model_dir_problem` says what a format's directory must hold.

**Lineage**: a data step may say what its dataset is -- the data it read (a window, a content
hash, row counts) and the parameters that made it -- in ``data_lineage.json`` at the dataset's
top (:func:`write_data_lineage`). The training step copies both into the lineage record it
writes beside every model (:mod:`kfstack.lineage`), with the run's hyperparameters and the last
value of every declared metric.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

import fsspec

from kfstack.errors import InvalidParameterError, RunFailedError
from kfstack.settings import Placeholder
from kfstack.team_code import LOCAL_SCHEME, local_path

# --- where things are -------------------------------------------------------------------------

INPUT_URI_ENV = "KFSTACK_INPUT_URI"
OUTPUT_URI_ENV = "KFSTACK_OUTPUT_URI"
MODEL_DIR_ENV = "KFSTACK_MODEL_DIR"
CHECKPOINT_URI_ENV = "KFSTACK_CHECKPOINT_URI"
REPORT_PATH_ENV = "KFSTACK_REPORT_PATH"
LOCATION_ENV = (INPUT_URI_ENV, OUTPUT_URI_ENV, MODEL_DIR_ENV, CHECKPOINT_URI_ENV, REPORT_PATH_ENV)
# Set in every replica of a tuning trial to the trial's name (Katib's ``${trialSpec.Name}``),
# unset in the training step. A trial's result is its metric lines: its model is never served nor
# kept, so code may skip exporting one (:func:`model_dir_problem` lets a trial leave none).
TRIAL_ENV = "KFSTACK_TRIAL"
# The training step's input as a folder on the replica's own disk (a copy of the dataset when its
# location is an object store's): set where the training code's own arguments name it.
INPUT_DIR_ENV = "KFSTACK_INPUT_DIR"
# What a step's code may be told in its own arguments: ``$KFSTACK_OUTPUT_URI`` in an argument is
# the variable's value where the code runs (docs/contracts.md, "Locations in your own arguments").
LOCATION_REFERENCES = (*LOCATION_ENV, INPUT_DIR_ENV)
_LOCATION_REFERENCE = re.compile(r"\$(KFSTACK_[A-Z_]+)(?![A-Za-z0-9_])")

# Names: Katib joins a trial's arguments unquoted into ``sh -c`` (docs/architecture.md#katib), so a
# hyperparameter name or categorical value that reaches argv must hold no space or shell
# metacharacter. Metric names are what Katib's default filter reads as one name (``[\w|-]+``), less
# the ``|``.
NAME_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*\Z")
CATEGORICAL_VALUE_PATTERN = re.compile(r"[A-Za-z0-9._+-]+\Z")
_MODULE_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\Z")
_ENV_NAME_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def location_references(text: str) -> list[str]:
    """The ``$KFSTACK_...`` location variables ``text`` names.

    Raises:
        InvalidParameterError: A ``$KFSTACK_`` name that is not a location variable.
    """
    names = _LOCATION_REFERENCE.findall(text)
    unknown = sorted(set(names) - set(LOCATION_REFERENCES))
    if unknown:
        raise InvalidParameterError(
            f"{text!r}: ${', $'.join(unknown)} is not a location; one of ${', $'.join(LOCATION_REFERENCES)}"
        )
    return names


def expand_locations(text: str, env: Mapping[str, str]) -> str:
    """``text`` with each ``$KFSTACK_...`` location variable replaced by its value in ``env``
    (one not set -- no input given -- by nothing). Done where the code runs, after any shell: a
    location never passes through Katib's unquoted command line, so a space in it is kept.

    Raises:
        InvalidParameterError: A ``$KFSTACK_`` name that is not a location variable.
    """
    location_references(text)
    return _LOCATION_REFERENCE.sub(lambda match: env.get(match.group(1), ""), text)


# A Kubernetes object name (RFC 1123 subdomain): what a Secret's name must be.
_SECRET_NAME_PATTERN = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?\Z")

# The declared types a hyperparameter can have, and the Katib parameter types each can be
# searched as (``discrete`` lists values of the declared type; ``categorical`` lists strings).
INT, FLOAT, STR, BOOL = "int", "float", "str", "bool"
HYPERPARAMETER_TYPES: dict[str, tuple[str, ...]] = {
    INT: ("int", "discrete"),
    FLOAT: ("double", "discrete"),
    STR: ("categorical",),
    BOOL: ("categorical",),
}

# Model formats: KServe's own runtimes serve the standard ones on a cluster
# (docs/architecture.md#kserve); a ``custom`` model is served by the team's own ``kserve.Model``.
SKLEARN, XGBOOST, LIGHTGBM, ONNX, CUSTOM = "sklearn", "xgboost", "lightgbm", "onnx", "custom"
MODEL_FORMATS = (SKLEARN, XGBOOST, LIGHTGBM, ONNX, CUSTOM)
# The model file of each standard format: exactly one of these at the top of the model
# directory, as KServe 0.20's sklearn, xgboost and lightgbm servers load it. For onnx, training
# writes the file and serving lays it out as Triton's repository (<name>/1/model.onnx).
MODEL_FILE_SUFFIXES: dict[str, tuple[str, ...]] = {
    SKLEARN: (".joblib", ".pkl", ".pickle"),
    XGBOOST: (".bst", ".json", ".ubj"),
    LIGHTGBM: (".bst",),
    ONNX: (".onnx",),
}


class ContractError(RunFailedError):
    """A team's code ran but did not keep its side of a contract (no model written, a report
    that is not a JSON object of numbers); the message says what is missing and where."""


def check_name(kind: str, name: str) -> None:
    """Raises unless ``name`` is a safe hyperparameter or metric name.

    Raises:
        InvalidParameterError: naming ``kind`` (``hyperparameter``, ``metric``) and the rule.
    """
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise InvalidParameterError(
            f"{kind} name {name!r} must match [A-Za-z_][A-Za-z0-9_-]* (Katib passes it through "
            f"an unquoted shell command and reads metrics as name=value)"
        )


def check_secret_names(names: Sequence[str], parameter: str) -> tuple[str, ...]:
    """``names`` as Secret names (Kubernetes object names), checked.

    Raises:
        InvalidParameterError: A name is not a valid object name.
    """
    bad = [name for name in names if not isinstance(name, str) or not _SECRET_NAME_PATTERN.match(name)]
    if bad:
        raise InvalidParameterError(
            f"{parameter}: {', '.join(map(repr, bad))} is not a Secret name (lowercase letters, "
            f"digits, '-' and '.'); Secrets are passed by name, never by value"
        )
    return tuple(names)


# --- Spark applications -----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class SparkApplicationCode:
    """A team's PySpark application, run as ``spark-submit`` runs it.

    Attributes:
        application: A ``.py`` file (a path on this machine, ``local:///...`` inside the Spark
            image on a cluster) or a module name (``my_team.jobs.clean``), run as ``__main__``.
        arguments: Its command line.
    """

    application: str
    arguments: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.application, str) or not self.application.strip():
            raise InvalidParameterError("spark_application: name a .py file or a module")
        if not self.is_file and not _MODULE_PATTERN.match(self.application):
            raise InvalidParameterError(
                f"spark_application={self.application!r} is neither a .py file nor a module name"
            )
        bad = [arg for arg in self.arguments if not isinstance(arg, str)]
        if bad:
            raise InvalidParameterError(f"spark_arguments: every argument must be a string, got {bad!r}")

    @property
    def is_file(self) -> bool:
        return self.application.endswith(".py")

    def importable_problem(self, required: bool = False) -> str | None:
        """Where this machine can tell: the file or module is missing.

        Args:
            required: This interpreter will run it (the embedded platform), so a file must be
                here (``local://`` too) and a module's package installed. Otherwise a
                ``local://`` file and an absent package live in an image: not checked here.
        """
        if self.is_file:
            path = local_path(self.application)
            if self.application.startswith(LOCAL_SCHEME) and not required:
                return None
            return None if os.path.isfile(path) else f"no such file: {path}"
        return module_problem(self.application, required)


# --- training code ----------------------------------------------------------------------------

# How an option is spelled on training code's argv (:attr:`TrainingCode.option_style`): a
# hyperparameter ``learning_rate`` as ``--learning_rate=`` or, as argparse code usually names
# its options, ``--learning-rate=``.
UNDERSCORES, DASHES = "underscores", "dashes"
OPTION_STYLES = (UNDERSCORES, DASHES)


def module_problem(module: str, required: bool = False) -> str | None:
    """Why ``module`` cannot be imported here, or None: found, or not ``required`` here and its
    top package absent (a launcher image without the team's package: its own image will tell)."""
    top = module.split(".")[0]
    try:
        if not required and importlib.util.find_spec(top) is None:
            return None
        if importlib.util.find_spec(module) is not None:
            return None
        return f"no module named {module!r}" + (" here" if required else "")
    except (ImportError, ValueError) as err:
        return f"module {module!r} cannot be found: {err}"


@dataclasses.dataclass(frozen=True)
class TrainingCode:
    """A team's training code and what it declares, readable without importing it.

    Attributes:
        entry: ``package.module`` (run as ``python -m``, hyperparameters on its argv) or
            ``package.module:function`` (called with them as keyword arguments).
        hyperparameters: Name -> declared type (:data:`HYPERPARAMETER_TYPES`): what the step
            and tuning may set, and how values are rendered on argv.
        metrics: The metric names the code prints as ``name=value`` lines (Katib's StdOut
            collector format); the last value of each becomes the step's Metrics and tuning
            may optimise any of them.
        metric_ranges: Optional: metric -> (low, high), the values it can take (an AUC lies in
            [0, 1]); a tuning goal outside them is refused before anything runs.
        arguments: Optional: more arguments the code takes on every run, name -> text (a
            function's keyword arguments, a module's ``--name=value``), typically where things
            are: ``{"data_dir": "$KFSTACK_INPUT_DIR", "model_dir": "$KFSTACK_MODEL_DIR"}``. Each
            ``$KFSTACK_...`` location is replaced in the replica (:func:`expand_locations`).
        option_style: How an option is spelled on the code's argv (:data:`OPTION_STYLES`):
            ``underscores`` writes hyperparameter ``learning_rate`` as ``--learning_rate=``,
            ``dashes`` as ``--learning-rate=`` (argparse's usual spelling). It spells what
            kfstack writes on argv: the hyperparameters of a module and of a function that
            takes ``argv``, and a module's own arguments; a function's keyword arguments are
            Python names and keep theirs. Declared names stay as they are either way.

    A function whose first parameter is named ``argv`` takes its hyperparameters as a command
    line: the training entrypoint sees that in the function's own signature and calls it as
    ``function([--name=value, ...], **arguments)``, as a ``main(argv=None, *, data_dir,
    model_dir)`` written around argparse expects.
    """

    entry: str
    hyperparameters: Mapping[str, str] = dataclasses.field(default_factory=dict)
    metrics: tuple[str, ...] = ()
    metric_ranges: Mapping[str, tuple[float, float]] = dataclasses.field(default_factory=dict)
    arguments: Mapping[str, str] = dataclasses.field(default_factory=dict)
    option_style: str = UNDERSCORES

    def __post_init__(self) -> None:
        module, colon, function = self.entry.partition(":") if isinstance(self.entry, str) else ("", "", "")
        if not _MODULE_PATTERN.match(module) or (colon and not function.isidentifier()):
            raise InvalidParameterError(
                f"training_code={self.entry!r}: expected package.module or package.module:function"
            )
        for name, kind in self.hyperparameters.items():
            check_name("hyperparameter", name)
            if kind not in HYPERPARAMETER_TYPES:
                raise InvalidParameterError(
                    f"hyperparameter_types: {name}={kind!r} is not one of {', '.join(HYPERPARAMETER_TYPES)}"
                )
        for metric in self.metrics:
            check_name("metric", metric)
        undeclared = sorted(set(self.metric_ranges) - set(self.metrics))
        if undeclared:
            raise InvalidParameterError(
                f"metric_ranges: {', '.join(undeclared)} not among the declared metrics"
            )
        if not isinstance(self.arguments, Mapping):
            raise InvalidParameterError(f"code_arguments={self.arguments!r}: expected name -> text")
        for name, text in self.arguments.items():
            check_name("code argument", name)
            if not isinstance(text, str):
                raise InvalidParameterError(f"code_arguments: {name}={text!r} must be text")
            location_references(text)
        both = sorted(set(self.arguments) & set(self.hyperparameters))
        if both:
            raise InvalidParameterError(f"code_arguments: {', '.join(both)} is a hyperparameter already")
        if self.option_style not in OPTION_STYLES:
            raise InvalidParameterError(
                f"option_style={self.option_style!r}: expected {' or '.join(OPTION_STYLES)} (how "
                f"hyperparameter learning_rate is written on argv: --learning_rate= or --learning-rate=)"
            )
        self._check_spellings()
        object.__setattr__(self, "metrics", tuple(self.metrics))
        object.__setattr__(self, "hyperparameters", dict(self.hyperparameters))
        object.__setattr__(self, "arguments", dict(self.arguments))

    def _check_spellings(self) -> None:
        """Raises when two names would be one option on argv (``a_b`` and ``a-b`` both written
        ``--a-b=`` in the dash style), which the code could not tell apart."""
        names = [*self.hyperparameters, *([] if self.function else self.arguments)]
        spelled: dict[str, str] = {}
        for name in names:
            other = spelled.setdefault(self.option(name), name)
            if other != name:
                raise InvalidParameterError(
                    f"option_style={self.option_style!r}: {other} and {name} are both written "
                    f"--{self.option(name)}= on argv; rename one"
                )

    @property
    def module(self) -> str:
        return self.entry.partition(":")[0]

    @property
    def function(self) -> str:
        """The function to call; ``""`` when the module runs as ``__main__``."""
        return self.entry.partition(":")[2]

    def importable_problem(self, required: bool = False) -> str | None:
        """Where this process can import the team's package: the module or function is missing.

        Args:
            required: This interpreter's processes will run it (the embedded platform), so the
                package must be installed here.
        """
        problem = module_problem(self.module, required)
        if problem or not self.function:
            return problem
        if importlib.util.find_spec(self.module.split(".")[0]) is None:
            return None
        try:
            module = importlib.import_module(self.module)
        except (Exception, SystemExit) as err:  # the team's module failed to import, whatever the way
            return f"module {self.module!r} failed to import: {type(err).__name__}: {err}"
        if not callable(getattr(module, self.function, None)):
            return f"module {self.module!r} has no function {self.function!r}"
        return None

    def check_metric(self, metric: str, parameter: str) -> None:
        """Raises unless ``metric`` is one the code declares it prints.

        Raises:
            InvalidParameterError: naming ``parameter`` and the declared metrics.
        """
        if metric not in self.metrics:
            declared = ", ".join(self.metrics) or "none"
            raise InvalidParameterError(
                f"{parameter}={metric!r} is not a metric the training code declares (declared: {declared})"
            )

    def render(self, name: str, value: Any) -> str:
        """One hyperparameter's value as its declared type writes it on argv.

        kfp.local 2.17 turns an ``int`` inside a ``dict`` into ``64.0``, and Katib substitutes
        strings, so values are converted to the declared type first.

        Raises:
            InvalidParameterError: An undeclared name, or a value that is not of its type or
                would be unsafe in an unquoted shell command.
        """
        if name not in self.hyperparameters:
            declared = ", ".join(self.hyperparameters) or "none"
            raise InvalidParameterError(
                f"hyperparameter {name!r} is not declared by the training code (declared: {declared})"
            )
        return render_value(name, self.hyperparameters[name], value)

    def option(self, name: str) -> str:
        """Hyperparameter (or a module's argument) ``name`` as an option on argv, without the
        leading ``--``: as declared, or with dashes for underscores in the dash style."""
        return name.replace("_", "-") if self.option_style == DASHES else name

    def argv(self, values: Mapping[str, Any]) -> list[str]:
        """``--name=value`` for each of ``values``, in the declared order, spelled as
        :attr:`option_style` says; a :class:`~kfstack.settings.Placeholder` (a Katib trial
        parameter) goes in as it is."""
        self._check_declared(values)
        rendered = {
            name: value if isinstance(value, Placeholder) else self.render(name, value)
            for name, value in values.items()
        }
        return [
            f"--{self.option(name)}={rendered[name]}" for name in self.hyperparameters if name in rendered
        ]

    def arguments_argv(self, located: Mapping[str, str]) -> list[str]:
        """A module's own arguments (:meth:`located`) as ``--name=value``, spelled as
        :attr:`option_style` says; they follow the hyperparameters on its argv."""
        return [f"--{self.option(name)}={value}" for name, value in located.items()]

    def typed(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """``values`` each as its declared type (kfp.local hands an int inside a dict over as
        ``64.0``, Katib and placeholders inside a dict constant as text); a
        :class:`~kfstack.settings.Placeholder` (a Katib trial parameter) stays as it is.

        Raises:
            InvalidParameterError: An undeclared name, or a value not of its type or unsafe in
                an unquoted shell command (what :meth:`argv` would refuse).
        """
        self._check_declared(values)
        return {
            name: value if isinstance(value, Placeholder) else self._typed(name, value)
            for name, value in values.items()
        }

    def _typed(self, name: str, value: Any) -> Any:
        self.render(name, value)  # of its type, safe in a shell command
        return convert(name, self.hyperparameters[name], value)

    def _check_declared(self, values: Mapping[str, Any]) -> None:
        undeclared = sorted(set(values) - set(self.hyperparameters))
        if undeclared:
            declared = ", ".join(self.hyperparameters) or "none"
            raise InvalidParameterError(
                f"hyperparameters {', '.join(undeclared)}: not declared by the training code "
                f"(declared: {declared})"
            )

    def located(self, env: Mapping[str, str]) -> dict[str, str]:
        """:attr:`arguments` with their locations as ``env`` has them (the replica's)."""
        return {name: expand_locations(text, env) for name, text in self.arguments.items()}

    def names_input_dir(self) -> bool:
        """Whether an argument asks for the input as a local folder (:data:`INPUT_DIR_ENV`)."""
        return any(INPUT_DIR_ENV in location_references(text) for text in self.arguments.values())

    def parse_argv(self, argv: Sequence[str]) -> dict[str, Any]:
        """``--name=value`` arguments back to typed values (the entrypoint's edge). An option is
        read in either spelling :meth:`argv` writes (``--learning_rate=`` or
        ``--learning-rate=``), whatever :attr:`option_style` is: the declared name first, then
        the dashed spelling of one.

        Raises:
            InvalidParameterError: An argument not of that form, undeclared, or mistyped.
        """
        dashed = {name.replace("_", "-"): name for name in self.hyperparameters}
        values: dict[str, Any] = {}
        for arg in argv:
            option, sep, raw = arg[2:].partition("=") if arg.startswith("--") else ("", "", "")
            if not sep:
                raise InvalidParameterError(f"training argument {arg!r}: expected --name=value")
            name = option if option in self.hyperparameters else dashed.get(option, option)
            self.render(name, raw)  # declared and well typed
            values[name] = convert(name, self.hyperparameters[name], raw)
        return values


def convert(name: str, kind: str, value: Any) -> Any:
    """``value`` (typed, or text from argv or Katib) as declared type ``kind``.

    Raises:
        InvalidParameterError: It is not of that type.
    """
    try:
        if kind == INT:
            if isinstance(value, bool):
                raise ValueError
            if isinstance(value, int):
                return value
            number = float(value)  # "64", "64.0" and kfp.local's 64.0 all mean 64
            if not number.is_integer():
                raise ValueError
            return int(number)
        if kind == FLOAT:
            if isinstance(value, bool):
                raise ValueError
            result = float(value)
            if not math.isfinite(result):
                raise ValueError
            return result
        if kind == BOOL:
            if isinstance(value, bool):
                return value
            if str(value).lower() in ("true", "false"):
                return str(value).lower() == "true"
            raise ValueError
        return str(value)
    except (TypeError, ValueError, OverflowError):
        raise InvalidParameterError(f"hyperparameter {name}={value!r} is not of type {kind}") from None


def render_value(name: str, kind: str, value: Any) -> str:
    """``value`` converted to ``kind`` and written as argv carries it (``true``/``false`` for a
    bool, ``repr`` for a float so that it reads back exactly).

    Raises:
        InvalidParameterError: Mistyped, or unsafe for an unquoted shell command.
    """
    typed = convert(name, kind, value)
    if kind == BOOL:
        text = "true" if typed else "false"
    elif kind == FLOAT:
        text = repr(typed)
    else:
        text = str(typed)
    if not CATEGORICAL_VALUE_PATTERN.match(text):
        raise InvalidParameterError(
            f"hyperparameter {name}={text!r}: values may hold only letters, digits and . _ + - "
            f"(Katib joins a trial's arguments unquoted into a shell command)"
        )
    return text


# --- reports and models -----------------------------------------------------------------------


def is_finite_number(value: Any) -> bool:
    """What a report's value may be: an int or float (not a bool), finite."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def write_report(values: Mapping[str, float]) -> bool:
    """Writes ``values`` where the step reads its report (``KFSTACK_REPORT_PATH``): from a Spark
    application's driver, or from the chief replica of training code. False, and nothing
    written, when the variable is unset (run outside a step).

    Raises:
        InvalidParameterError: A value is not a finite number (the step would refuse it).
    """
    bad = sorted(name for name, value in values.items() if not is_finite_number(value))
    if bad:
        raise InvalidParameterError(f"a report holds finite numbers only; not so: {', '.join(bad)}")
    path = os.environ.get(REPORT_PATH_ENV)
    if not path:
        return False
    with open(path, "w", encoding="utf-8") as f:
        json.dump(dict(values), f, indent=2)
    return True


def read_report(path: str, who: str) -> dict[str, float]:
    """The numbers a team's code wrote to its report (``KFSTACK_REPORT_PATH``); ``{}`` when it
    wrote none (a report is optional).

    Raises:
        ContractError: The file is not a JSON object of numbers; names the offending keys.
    """
    if not os.path.exists(path):
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            report = json.load(f)
    except (OSError, ValueError) as err:
        raise ContractError(f"{who} wrote a report ({path}) that is not JSON: {err}") from err
    if not isinstance(report, dict):
        raise ContractError(f"{who} wrote a report ({path}) that is not a JSON object of numbers")
    bad = sorted(str(key) for key, value in report.items() if not is_finite_number(value))
    if bad:
        raise ContractError(
            f"{who} wrote a report ({path}) whose values must be finite numbers; not so: {', '.join(bad)}"
        )
    return {str(key): float(value) for key, value in report.items()}


DATA_LINEAGE_FILE = "data_lineage.json"
SECTIONS = ("data", "parameters")


def write_data_lineage(output_uri: str, data: Mapping[str, Any], parameters: Mapping[str, Any]) -> None:
    """Writes ``data_lineage.json`` at the top of the dataset at ``output_uri``: ``data``, what
    the dataset was made from (e.g. ``window``, ``content_hash``, ``rows_read``), and
    ``parameters``, the pipeline parameters that made it, by name. Optional: a training step on
    a dataset without one records only the dataset's URI.
    """
    record = {"data": dict(data), "parameters": dict(parameters)}
    with fsspec.open(f"{output_uri.rstrip('/')}/{DATA_LINEAGE_FILE}", "w") as f:
        json.dump(record, f, indent=2, sort_keys=True)


def read_data_lineage(dataset_uri: str) -> dict[str, dict[str, Any]]:
    """The dataset's ``data_lineage.json`` (``data`` and ``parameters``); both empty without one.

    Raises:
        ContractError: The file is there but is not a JSON object of two objects.
    """
    uri = f"{dataset_uri.rstrip('/')}/{DATA_LINEAGE_FILE}"
    try:
        with fsspec.open(uri, "r") as f:
            record = json.load(f)
    except FileNotFoundError:
        return {"data": {}, "parameters": {}}
    except ValueError as err:
        raise ContractError(f"{uri} is not JSON: {err}") from err
    sections = {key: record.get(key, {}) for key in SECTIONS} if isinstance(record, dict) else {}
    if not (sections and all(isinstance(value, dict) for value in sections.values())):
        raise ContractError(f"{uri} must be a JSON object whose 'data' and 'parameters' are objects")
    return sections


def check_model_format(model_format: str) -> str:
    """Raises unless ``model_format`` is a format kfstack knows.

    Raises:
        InvalidParameterError: naming the known formats.
    """
    if model_format not in MODEL_FORMATS:
        raise InvalidParameterError(f"model_format={model_format!r} is not one of {', '.join(MODEL_FORMATS)}")
    return model_format


def model_files(names: Sequence[str], model_format: str) -> list[str]:
    """Those of ``names`` (the files at the top of a model directory) that are a model file of
    ``model_format``, sorted: exactly one is what a standard format's runtime loads."""
    return sorted(name for name in names if name.endswith(MODEL_FILE_SUFFIXES[model_format]))


def tuning_trial(env: Mapping[str, str] | None = None) -> str:
    """The name of the tuning trial this process trains in (:data:`TRIAL_ENV`), or ``""`` in the
    training step: code may skip exporting a model that nothing keeps."""
    return (os.environ if env is None else env).get(TRIAL_ENV, "")


def model_dir_problem(model_dir: str, model_format: str, trial: bool = False) -> str | None:
    """What ``model_dir`` lacks for ``model_format``, or None when it holds a model of it. A
    tuning ``trial`` may leave it empty (:data:`TRIAL_ENV`); what it does leave is checked."""
    files = sorted(
        os.path.relpath(os.path.join(root, name), model_dir)
        for root, _, names in os.walk(model_dir)
        for name in names
    )
    if not files:
        return None if trial else "nothing was written to the model directory"
    if model_format not in MODEL_FILE_SUFFIXES:
        return None  # custom: the team's own predictor knows its files
    suffixes = MODEL_FILE_SUFFIXES[model_format]
    top = model_files([name for name in files if os.sep not in name], model_format)
    if len(top) != 1:
        return (
            f"a {model_format} model directory holds exactly one {'/'.join(suffixes)} file at its top "
            f"(KServe's runtime for the format loads it); found {top or 'none'} among {files}"
        )
    return None


def locations_env(
    *,
    input_uri: str = "",
    output_uri: str = "",
    model_dir: str = "",
    checkpoint_uri: str = "",
    report_path: str = "",
) -> dict[str, str]:
    """The location variables a step sets for a team's code (empty ones are left unset)."""
    values = {
        INPUT_URI_ENV: input_uri,
        OUTPUT_URI_ENV: output_uri,
        MODEL_DIR_ENV: model_dir,
        CHECKPOINT_URI_ENV: checkpoint_uri,
        REPORT_PATH_ENV: report_path,
    }
    return {name: value for name, value in values.items() if value}
