"""kfstack's examples, a package of their own as a team's pipelines are.

Two pipelines built on kfstack's public components only, declared to kfstack through the
``kfstack.pipelines`` entry-point group (``examples/pyproject.toml``):

- :mod:`.flights` -- ``flights-training`` and ``flights-retraining``: a PySpark feature job on the
  NYC 2013 flights, PyTorch or TensorFlow training code, a custom KServe predictor;
- :mod:`.digits` -- ``digits-training``: the 8×8 digits scikit-learn ships, Keras code under
  MultiWorkerMirroredStrategy tuned over its own hyperparameters, an ONNX model served as Triton
  serves it.

Neither is part of kfstack's own install: ``pip install -e examples`` (or the wheel built from
``examples/``) adds them and their data.
"""

# The kfstack release these examples are built and tested with (tests/test_examples_package.py
# holds the two equal).
__version__ = "0.1.0"
