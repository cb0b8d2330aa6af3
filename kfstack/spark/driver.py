"""The driver wrapper: runs a team's PySpark application as ``spark-submit`` would, then hands
its report back to the step.

Both platforms make this file the main file of the Spark job -- ``spark-submit ... driver.py
<application> [args...]`` on this machine (:mod:`kfstack.spark.local`), a SparkApplication's
``mainApplicationFile`` on a cluster (:data:`kfstack.images.SPARK_DRIVER_FILE`) -- so the team's
code starts the same way everywhere:

1. ``KFSTACK_REPORT_PATH`` is set to a file in a fresh local folder (the team's code may write a
   JSON object of numbers there, :mod:`kfstack.contracts`);
2. the application (a ``.py`` file, ``local://`` allowed, or a module name) runs as
   ``__main__`` with ``sys.argv == [application, *args]`` and its own folder (a file) or the
   working directory (a module, as ``python -m``) first on ``sys.path``: what it would see as
   spark-submit's main file. ``$KFSTACK_INPUT_URI``, ``$KFSTACK_OUTPUT_URI`` and
   ``$KFSTACK_REPORT_PATH`` in an argument are replaced by their values first
   (:func:`kfstack.contracts.expand_locations`), for an application that takes its locations
   as arguments (``--output=$KFSTACK_OUTPUT_URI``);
3. once it returns -- or exits with status 0 -- the report, if it wrote one, is checked and
   copied to the URI in ``KFSTACK_REPORT_UPLOAD_URI`` (any fsspec URI; a local path on the
   embedded platform), where the step reads it back. A non-zero exit of the application is the
   driver's, and an exception its traceback and exit status 1: spark-submit and the operator
   then report the failure. Either way, where the application gave a reason (the exception, or
   ``sys.exit("message")``), the wrapper's last line says it (:data:`FAILURE_LINE`), for the
   step's error to name.

The upload variable is kfstack's own wiring between the step and this wrapper, not a contract a
team's code reads. The report is the driver's alone: executors never see the variable.

Run as a file by spark-submit, so it imports kfstack absolutely (the package is installed in
every image that runs Spark) and keeps its own folder off ``sys.path``.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import traceback
from collections.abc import Sequence

import fsspec

from kfstack.contracts import REPORT_PATH_ENV, SparkApplicationCode, expand_locations, read_report
from kfstack.team_code import run_as_main
from kfstack.tracking.client import join_run

# Where the wrapper copies the team's report once the application returned; set by the step.
REPORT_UPLOAD_URI_ENV = "KFSTACK_REPORT_UPLOAD_URI"
# The wrapper's last line when the application failed with a reason (an exception, or an exit
# with a message): the step's error names it (:mod:`kfstack.spark.local`).
FAILURE_LINE = "kfstack: the spark application failed: "

logger = logging.getLogger("kfstack.spark.driver")


def run_application(code: SparkApplicationCode) -> None:
    """Runs ``code`` as ``__main__``, as spark-submit runs its main file
    (:func:`kfstack.team_code.run_as_main`).

    Raises:
        SystemExit: The application exited with a non-zero status (or a message).
        Exception: Whatever the application raised, unchanged.
    """
    run_as_main(code.application, code.arguments)


def upload_report(report_path: str, upload_uri: str, who: str) -> dict[str, float]:
    """Checks the report at ``report_path`` and copies it to ``upload_uri``; ``{}`` and nothing
    copied when the application wrote none.

    Raises:
        ContractError: The report is not a JSON object of finite numbers (nothing is copied:
            the step fails here, in the driver's log, not later in a reader).
    """
    report = read_report(report_path, who)
    if not os.path.exists(report_path):
        return report
    fs, target = fsspec.core.url_to_fs(upload_uri)
    if "file" in fs.protocol:  # a local target's folder may not exist yet; an object store has none
        os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
    fs.put_file(report_path, target)
    logger.info("report of %s (%d values) copied to %s", who, len(report), upload_uri)
    return report


def run(code: SparkApplicationCode, upload_uri: str = "") -> dict[str, float]:
    """The whole wrapper: report file set up, application run, report copied.

    Args:
        code: The team's application and its arguments.
        upload_uri: Where the report goes; empty: it is checked but kept nowhere.

    Returns:
        The numbers of the report (``{}`` when none was written).

    Raises:
        SystemExit, Exception: From the application (see :func:`run_application`).
        ContractError: A report that is not a JSON object of numbers.
    """
    who = f"spark application {code.application}"
    with tempfile.TemporaryDirectory(prefix="kfstack-report-") as folder:
        report_path = os.path.join(folder, "report.json")
        saved = os.environ.get(REPORT_PATH_ENV)
        os.environ[REPORT_PATH_ENV] = report_path
        try:
            arguments = tuple(expand_locations(argument, os.environ) for argument in code.arguments)
            run_application(SparkApplicationCode(code.application, arguments))
        finally:
            if saved is None:
                os.environ.pop(REPORT_PATH_ENV, None)
            else:
                os.environ[REPORT_PATH_ENV] = saved
        if not upload_uri:
            return read_report(report_path, who)
        return upload_report(report_path, upload_uri, who)


def main(argv: Sequence[str] | None = None) -> int:
    """``driver.py <application> [args...]``: exit 0 once the application succeeded and its
    report was copied; the application's own status otherwise."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        print("usage: driver.py <application .py file or module> [arguments...]", file=sys.stderr)
        return 2
    # The wrapper's own messages, without configuring the root logger the application may set up.
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
    join_run()  # the application's own MLflow calls join its task's run (kfstack.tracking)
    try:
        run(SparkApplicationCode(args[0], tuple(args[1:])), os.environ.get(REPORT_UPLOAD_URI_ENV, ""))
    except SystemExit as exit:
        if not isinstance(exit.code, str):
            raise
        # sys.exit("message"): the message as Python prints it, then the reason line; status 1.
        print(exit.code, file=sys.stderr)
        print(f"{FAILURE_LINE}{exit.code}", file=sys.stderr, flush=True)
        return 1
    except Exception as err:
        # The traceback first (as Python prints it), then the reason on a line of its own.
        traceback.print_exc()
        print(f"{FAILURE_LINE}{type(err).__name__}: {err}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    # Run as a file, this folder is sys.path[0]; the application gets its own in its place.
    if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
        del sys.path[0]
    sys.exit(main())
