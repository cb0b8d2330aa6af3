"""The by-hand baselines of ``benchmarks.run_breakdown``: the work of an embedded run's steps done
with the plain tools (``spark-submit``, ``torchrun``, processes with ``TF_CONFIG``, a scoring
script), none of kfstack's orchestration around them."""
