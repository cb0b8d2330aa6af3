"""A team's own PyTorch training function, as a team would write it: it never imports kfstack.

It reads the Parquet rows at ``$KFSTACK_INPUT_URI``, fits a linear regression with DDP over the
replicas the job starts (torch.distributed reads the env every operator sets), prints Katib
metric lines, and on rank 0 saves the model to ``$KFSTACK_MODEL_DIR`` and a report to
``$KFSTACK_REPORT_PATH``.
"""

import json
import os

import pyarrow.parquet as pq
import torch
import torch.distributed as dist


def train(learning_rate: float, epochs: int, optimizer: str = "sgd") -> None:
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if world_size > 1:
        dist.init_process_group("gloo")
    table = pq.read_table(os.environ["KFSTACK_INPUT_URI"])
    x = torch.tensor(table.column("x").to_pylist(), dtype=torch.float32).unsqueeze(1)
    y = torch.tensor(table.column("y").to_pylist(), dtype=torch.float32).unsqueeze(1)
    mine = slice(rank, None, world_size)  # every rank its own rows
    model = torch.nn.Linear(1, 1)
    if world_size > 1:
        model = torch.nn.parallel.DistributedDataParallel(model)
    make = torch.optim.SGD if optimizer == "sgd" else torch.optim.Adam
    step = make(model.parameters(), lr=learning_rate)
    for epoch in range(1, epochs + 1):
        step.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x[mine]), y[mine])
        loss.backward()
        step.step()
        with torch.no_grad():
            val_loss = torch.nn.functional.mse_loss(model(x), y).item()
        print(f"epoch={epoch} val_loss={val_loss:.6f} world={world_size}")
    if rank == 0:
        weights = model.module if world_size > 1 else model
        torch.save(weights.state_dict(), os.path.join(os.environ["KFSTACK_MODEL_DIR"], "model.pt"))
        with open(os.environ["KFSTACK_REPORT_PATH"], "w") as f:
            json.dump({"rows": table.num_rows}, f)
    if world_size > 1:
        # The ranks leave together (as the flights trainer does): a rank that tears its gloo
        # group down while rank 0 still writes can abort in the teardown.
        dist.barrier()
        dist.destroy_process_group()
