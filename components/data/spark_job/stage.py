"""A team's own PySpark application as a platform stage: a SparkApplication, or spark-submit here.

Both platforms run the same driver wrapper (:mod:`kfstack.spark.driver`) with the same argv,
``[application, *arguments]``, and the same location variables (:mod:`kfstack.contracts`):
``KFSTACK_INPUT_URI`` and ``KFSTACK_OUTPUT_URI`` as Spark opens them (``s3a://`` for an object
store), ``KFSTACK_REPORT_PATH`` set by the wrapper. The wrapper copies the application's report to
the ``report`` artifact's own location (its path here, its URI on a cluster), from where the stage
reads it into the Metrics: on Kubernetes the SparkApplication's driver writes it to the object
store and :meth:`SparkJobStage.collect` reads it back; locally
:func:`kfstack.spark.local.run_local_job` runs ``spark-submit --master local[N]`` of the wrapper
and the stage reads the file.

Why the report artifact's own location: nothing else writes there (the task itself only logs
the numbers as the artifact's metadata), and it keeps the application's output dataset free of
kfstack's files.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from collections.abc import Mapping
from typing import Any

import fsspec

from kfstack import images
from kfstack.components import argument_names
from kfstack.contracts import (
    INPUT_URI_ENV,
    OUTPUT_URI_ENV,
    REPORT_PATH_ENV,
    SparkApplicationCode,
    check_secret_names,
    location_references,
    locations_env,
    read_report,
)
from kfstack.errors import InvalidParameterError
from kfstack.kubernetes.launcher import Cluster
from kfstack.kubernetes.naming import RunContext
from kfstack.kubernetes.resources import SPARK_APPLICATION
from kfstack.kubernetes.spark_application import (
    SparkApplicationRequest,
    SparkJobPlacement,
    SparkResources,
    build_spark_application,
)
from kfstack.platforms import KUBERNETES, LOCAL, PLATFORM_ARGUMENT, StageResult, Variant
from kfstack.settings import Placeholder, Settings, setting
from kfstack.spark.driver import REPORT_UPLOAD_URI_ENV
from kfstack.spark.local import LocalSparkJob, run_local_job
from kfstack.uris import embedded_location, fsspec_uri, spark_uri

NAME_PREFIX = "kfs-spark"
REPORT = "report"
OUTPUT = "output"


@dataclasses.dataclass(frozen=True)
class SparkJobOptions(Settings):
    """The scalar choices of a Spark job besides its sizes and placement.

    Attributes:
        input_uri: The raw data the application reads (``KFSTACK_INPUT_URI``); empty: none.
        image: The Spark image of driver and executors on Kubernetes; empty: kfstack's own
            (``kfstack.images``), which has pyspark, kfstack and the driver wrapper.
        local_cores: ``local[N]`` on the embedded platform; 0: every core (``local[*]``).
    """

    concern = "spark job"

    input_uri: str = ""
    image: str = ""
    local_cores: int = setting(0, ge=0)

    def check(self) -> list[str]:
        if isinstance(self.image, Placeholder):
            return []
        try:
            images.check_image(self.image, self.argument("image"))
        except InvalidParameterError as err:
            return [str(err)]
        return []


# The component's argument names of the options, where they differ (a pipeline's other images
# are its trainers', hence ``spark_image``).
OPTION_ARGUMENTS = {"image": "spark_image"}


@dataclasses.dataclass(frozen=True)
class SparkJobSettings:
    """Everything one run of a team's Spark application depends on, validated.

    Attributes:
        code: The application and its arguments.
        output_uri: Where the application writes its dataset (the ``output`` artifact).
        report_uri: Where the driver wrapper copies the application's report (the ``report``
            artifact's own location).
        options: Input, image, local cores.
        spark_conf: The team's Spark settings (``sparkConf``; locally ``--conf``, over kfstack's).
        env_secrets: Secrets whose keys become the driver's and executors' environment.
        resources: Driver and executor sizes (locally the driver's memory only).
        placement: Node pool, Secrets, service account and timeout of the SparkApplication.
    """

    code: SparkApplicationCode
    output_uri: str
    report_uri: str
    options: SparkJobOptions
    spark_conf: Mapping[str, str]
    env_secrets: tuple[str, ...]
    resources: SparkResources
    placement: SparkJobPlacement

    @property
    def image(self) -> str:
        return self.options.image or images.image_for("spark")


def application_problem(code: SparkApplicationCode, platform: str) -> str | None:
    """Why ``code`` cannot run on ``platform``, where this machine can tell; None otherwise.

    A file on Kubernetes lives in the Spark image, named ``local:///...`` (checked there by the
    driver); here it must exist. A module is looked up where its package is installed; locally
    it must be, as spark-submit's Python child runs with this interpreter.
    """
    if code.is_file and platform == KUBERNETES and not code.application.startswith("local://"):
        return (
            f"spark_application={code.application!r}: on Kubernetes a .py application is a file "
            f"inside the Spark image, named local:///path/in/the/image.py"
        )
    problem = code.importable_problem(required=platform == LOCAL)
    return f"spark_application: {problem}" if problem else None


def _conf_value(key: str, value: Any) -> str:
    """A ``spark_conf`` value as Spark reads it. KFP hands a dict's numbers over as floats
    (``2`` arrives as ``2.0``), which Spark would refuse for an integer setting."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (str, int, float)):
        return str(value)
    raise InvalidParameterError(f"spark_conf[{key!r}]={value!r}: a Spark setting is a string or a number")


def spark_conf(values: Mapping[str, Any] | None) -> dict[str, str]:
    """``spark_conf`` checked: ``spark.*`` keys (Spark ignores any other), scalar values.

    Raises:
        InvalidParameterError: Naming every key at fault.
    """
    if values is None:
        return {}
    if not isinstance(values, Mapping):
        raise InvalidParameterError(f"spark_conf={values!r}: expected a dict of Spark settings")
    bad = sorted(str(key) for key in values if not isinstance(key, str) or not key.startswith("spark."))
    if bad:
        raise InvalidParameterError(
            f"spark_conf: {', '.join(bad)} is not a Spark setting (they start with 'spark.'; "
            f"Hadoop's are 'spark.hadoop.*')"
        )
    return {key: _conf_value(key, value) for key, value in values.items()}


# The locations a Spark application's arguments may name: its driver's (the training step's are
# not set there).
SPARK_LOCATIONS = (INPUT_URI_ENV, OUTPUT_URI_ENV, REPORT_PATH_ENV)


def _spark_locations(argument: Any) -> None:
    """Raises unless every location ``argument`` names is one a Spark driver is given."""
    if not isinstance(argument, str):
        return  # SparkApplicationCode names a non-string argument
    others = sorted(set(location_references(argument)) - set(SPARK_LOCATIONS))
    if others:
        raise InvalidParameterError(
            f"spark_arguments: {argument!r} names ${', $'.join(others)}, which a Spark application is "
            f"not given; it has ${', $'.join(SPARK_LOCATIONS)}"
        )


def settings_from_arguments(arguments: Mapping[str, Any]) -> SparkJobSettings:
    """The settings of the component's arguments (artifacts as their locations).

    Raises:
        InvalidParameterError: Naming every bad argument; nothing was started.
    """
    problems: list[str] = []

    def checked(build: Any) -> Any:
        try:
            return build()
        except InvalidParameterError as err:
            problems.append(str(err))
            return None

    arguments_list = arguments.get("spark_arguments") or []
    if not isinstance(arguments_list, (list, tuple)):
        problems.append(f"spark_arguments={arguments_list!r}: expected a list of strings")
        arguments_list = []
    application = arguments.get("spark_application", "")
    code = checked(lambda: SparkApplicationCode(application, tuple(arguments_list)))
    for argument in arguments_list:
        checked(lambda argument=argument: _spark_locations(argument))
    if code is not None:
        problem = application_problem(code, arguments.get(PLATFORM_ARGUMENT, ""))
        if problem:
            problems.append(problem)
    secrets = arguments.get("env_secrets") or []
    if not isinstance(secrets, (list, tuple)):
        problems.append(f"env_secrets={secrets!r}: expected a list of Secret names")
        secrets = []
    settings = {
        "code": code,
        "output_uri": arguments.get(OUTPUT, ""),
        "report_uri": arguments.get(REPORT, ""),
        "options": checked(lambda: SparkJobOptions.from_arguments(arguments, OPTION_ARGUMENTS)),
        "spark_conf": checked(lambda: spark_conf(arguments.get("spark_conf"))),
        "env_secrets": checked(lambda: check_secret_names(list(secrets), "env_secrets")),
        "resources": checked(lambda: argument_names.from_arguments(SparkResources, arguments)),
        "placement": checked(lambda: argument_names.from_arguments(SparkJobPlacement, arguments)),
    }
    for name in (OUTPUT, REPORT):
        if not arguments.get(name):
            problems.append(f"{name}: the component's output artifact has no location")
    if problems:
        raise InvalidParameterError("spark-job: " + "; ".join(problems))
    return SparkJobSettings(**settings)


def _remote_env(settings: SparkJobSettings) -> dict[str, str]:
    """The driver's and executors' variables on a cluster: the URIs as Spark opens them, and
    where the wrapper uploads the report (as fsspec opens it)."""
    return {
        **locations_env(
            input_uri=spark_uri(settings.options.input_uri), output_uri=spark_uri(settings.output_uri)
        ),
        REPORT_UPLOAD_URI_ENV: fsspec_uri(settings.report_uri),
    }


class SparkJobStage:
    """The ``spark-job`` component's stage (:class:`kfstack.platforms.Stage`)."""

    component = "spark-job"
    reference_output = "spark_job"

    def settings(self, arguments: Mapping[str, Any]) -> SparkJobSettings:
        """See :func:`settings_from_arguments`."""
        return settings_from_arguments(arguments)

    def variants(self, settings: SparkJobSettings) -> list[Variant[SparkJobSettings]]:
        """One way: a SparkApplication of the spark-operator."""
        return [Variant(settings, (SPARK_APPLICATION,))]

    def preflight(self, settings: SparkJobSettings) -> None:
        """Nothing to read first: the input is the application's to open (a file, a folder, a
        table), so only the application can tell whether it is there."""

    def build(self, settings: SparkJobSettings, context: RunContext) -> list[dict]:
        """The SparkApplication running the driver wrapper with the application's argv."""
        placement = settings.placement
        return [
            build_spark_application(
                SparkApplicationRequest(
                    name=context.name(NAME_PREFIX),
                    labels=context.labels(),
                    image=settings.image,
                    main_file=images.SPARK_DRIVER_FILE,
                    arguments=[settings.code.application, *settings.code.arguments],
                    profile=placement.profile,
                    secrets=dataclasses.replace(
                        placement.secrets, env_from=settings.env_secrets, tracking=context.tracking_secret()
                    ),
                    service_account=placement.service_account,
                    resources=settings.resources,
                    spark_conf=dict(settings.spark_conf),
                    env={**_remote_env(settings), **context.tracking_env()},
                    istio_mesh=placement.istio_mesh,
                )
            )
        ]

    def local_job(self, settings: SparkJobSettings) -> LocalSparkJob:
        """The same run as spark-submit on this machine (the artifacts' local paths)."""
        env = {
            **locations_env(
                input_uri=embedded_location(spark_uri(settings.options.input_uri)),
                output_uri=embedded_location(settings.output_uri),
            ),
            REPORT_UPLOAD_URI_ENV: settings.report_uri,
        }
        return LocalSparkJob(
            code=settings.code,
            env=env,
            cores=settings.options.local_cores,
            driver_memory=settings.resources.driver_memory,
            spark_conf=settings.spark_conf,
        )

    def run_local(self, settings: SparkJobSettings) -> StageResult:
        job = self.local_job(settings)
        # A retried task must not read the report an earlier attempt left.
        if os.path.exists(settings.report_uri):
            os.remove(settings.report_uri)
        result = run_local_job(job)
        report = read_report(settings.report_uri, f"spark application {settings.code.application}")
        reference = {
            "kind": "spark-submit",
            "master": job.master,
            "application": settings.code.application,
            "seconds": result.seconds,
        }
        return StageResult({REPORT: report}, reference)

    def collect(self, settings: SparkJobSettings, finished: list[dict], cluster: Cluster) -> StageResult:
        return StageResult({REPORT: read_remote_report(settings)}, {})


def read_remote_report(settings: SparkJobSettings) -> dict[str, float]:
    """The report the driver wrapper uploaded; ``{}`` when the application wrote none.

    Raises:
        ContractError: It is not a JSON object of finite numbers.
    """
    uri = fsspec_uri(settings.report_uri)
    fs, path = fsspec.core.url_to_fs(uri)
    who = f"spark application {settings.code.application} (report uploaded to {uri})"
    if not fs.exists(path):
        return {}
    with tempfile.TemporaryDirectory(prefix="kfstack-report-") as folder:
        local = os.path.join(folder, "report.json")
        fs.get_file(path, local)
        return read_report(local, who)


STAGE = SparkJobStage()
