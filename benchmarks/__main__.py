"""``python -m benchmarks`` (``make bench``): every CPU benchmark, one after the other.

They run serially because each measures the whole machine. The tuning benchmark runs 108 trials
(about 20 minutes on 2 cores). The GPU benchmark
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
    spark_vs_duckdb,
    tf_scaling,
    tuning_efficiency,
)

for benchmark in (
    install_size,
    main_job,
    spark_vs_duckdb,
    ddp_scaling,
    tf_scaling,
    tuning_efficiency,
    predictor_throughput,
    model_server_overhead,
    live_drift_steering,
    retraining,
):
    benchmark.main([])
