"""The flight-delay predictor: a KServe ``ModelServer`` serving a trained model directory.

What the predictor image's ServingRuntime container runs, and what the embedded platform starts
on loopback (``kfstack serve`` too)::

    python -m kfstack_examples.flights.predictor --model_name=NAME --model_dir=DIR \\
        [--http_port=8080] [--max_batch=10000] [--enable_grpc=false]

See :mod:`.server`.
"""

import sys

MODULE = "kfstack_examples.flights.predictor"
DEFAULT_MODEL_NAME = "flights-delay"
# The flights predictor as the deployment step's custom predictor: the kserve.Model class a
# kfstack model server builds (embedded platform, evaluation), and on a cluster the
# ClusterServingRuntime that runs this server and the model format it declares
# (examples/manifests/flights-predictor).
MODEL_CLASS = f"{MODULE}.server:FlightDelayModel"
RUNTIME = "kfstack-flights-predictor"
MODEL_FORMAT = "kfstack-flights"


def command(model_dir: str, name: str, port: int, *extra: str, module: str = MODULE) -> list[str]:
    """The predictor's command line on this machine: gRPC off (every client here speaks HTTP).
    ``module``: a server with the same flags (a test's fault-injecting one)."""
    return [
        sys.executable,
        "-m",
        module,
        f"--model_name={name}",
        f"--model_dir={model_dir}",
        f"--http_port={port}",
        "--bind_address=127.0.0.1",  # this machine's clients only
        "--enable_grpc=false",
        *extra,
    ]
