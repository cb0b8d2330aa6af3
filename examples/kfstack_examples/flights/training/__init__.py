"""The flights example's training code: the delay classifier in PyTorch or TensorFlow.

A team's training code as the generic ``distributed_training`` step runs it
(:mod:`kfstack.contracts`): :mod:`.train` is the entry, declared to the pipeline by
:data:`.settings.TRAINER_CODE`; it starts :mod:`.pytorch_trainer` or
:mod:`.tensorflow_trainer` by its ``framework`` hyperparameter. Both build the network of
:mod:`.architecture` and export the same ONNX interface, so evaluation and serving do not care
which one trained.
"""
