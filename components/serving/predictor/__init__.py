"""The flight-delay predictor: a KServe ``ModelServer`` serving a trained model directory.

What the predictor image's ServingRuntime container runs, and what the embedded platform starts
on loopback (``kfstack serve`` too)::

    python -m kfstack.components.serving.predictor --model_name=NAME --model_dir=DIR \\
        [--http_port=8080] [--max_batch=10000] [--enable_grpc=false]

See :mod:`.server`.
"""

MODULE = "kfstack.components.serving.predictor"
DEFAULT_MODEL_NAME = "flights-delay"
