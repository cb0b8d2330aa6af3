"""``python -m benchmarks`` (``make bench``): every CPU benchmark, one after the other.

They run serially because each measures the whole machine. The tuning benchmark runs 108 trials
(about 20 minutes on 2 cores); the run breakdown runs flights-training on full data and small,
and digits, each embedded and by hand (about 20 minutes). The GPU benchmark
(``python -m benchmarks.gpu_throughput``) needs a CUDA device and runs only when asked, and so
does ``python -m benchmarks.first_hour``, which builds a new environment from the package index.
"""

from benchmarks import (
    ddp_scaling,
    install_size,
    live_drift_steering,
    main_job,
    model_server_overhead,
    predictor_throughput,
    retraining,
    run_breakdown,
    spark_vs_duckdb,
    step_cache,
    tf_scaling,
    tuning_efficiency,
)

# Each with its arguments: the run breakdown measures all its configurations.
for benchmark, arguments in (
    (install_size, []),
    (main_job, []),
    (run_breakdown, ["--config", "all"]),
    (step_cache, []),
    (spark_vs_duckdb, []),
    (ddp_scaling, []),
    (tf_scaling, []),
    (tuning_efficiency, []),
    (predictor_throughput, []),
    (model_server_overhead, []),
    (live_drift_steering, []),
    (retraining, []),
):
    benchmark.main(arguments)
