"""Framework-neutral pieces of distributed training: the operator env contracts, shard
assignment, metrics, checkpoints and the local process-group launcher."""
