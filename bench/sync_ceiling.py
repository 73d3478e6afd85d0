"""What the gradient exchange itself costs two workers on two cores (issue 32): two bare loops
(bench/parallel_ceiling.py's model and step) in two processes, each step followed by nothing,
a one-float allreduce (a barrier), or an allreduce of every gradient in one flat buffer, over
torch.distributed's gloo. Prints the summed samples/s and each process'. Not a product feature;
results in docs/benchmarks.md. bench/bare_horovod.py is the same loop through Horovod.

usage: python bench/sync_ceiling.py MODE WORKERS BATCH STEPS [PRECISION]
    python bench/sync_ceiling.py allreduce 2 4096 40 bf16     (MODE: none, barrier, allreduce)
"""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from parallel_ceiling import bare_model, rate


def worker(rank: int, world: int, mode: str, batch: int, steps: int, bf16: bool, out) -> None:
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29533")
    exchanges = world > 1 or mode != "none"
    if exchanges:  # one lone process without a group is parallel_ceiling.py's loop
        dist.init_process_group("gloo", rank=rank, world_size=world)
    model, x, y = bare_model(batch)
    params = list(model.parameters())
    optimizer = torch.optim.AdamW(params, 1e-3)
    one = torch.zeros(1)

    def exchange() -> None:
        if mode == "barrier":
            dist.all_reduce(one)
        elif mode == "allreduce":
            flat = torch.cat([p.grad.reshape(-1) for p in params])
            dist.all_reduce(flat)
            flat /= world
            offset = 0
            for p in params:
                p.grad.copy_(flat[offset : offset + p.numel()].view_as(p))
                offset += p.numel()

    out.put(
        rate(model, optimizer, x, y, bf16, steps, exchange, dist.barrier if exchanges else None)
    )


def main() -> None:
    mode, world, batch, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    if mode not in ("none", "barrier", "allreduce"):
        sys.exit(f"error: MODE is {mode!r}; use none, barrier or allreduce")
    bf16 = sys.argv[5:6] == ["bf16"]
    context = mp.get_context("spawn")
    out = context.Queue()
    processes = [
        context.Process(target=worker, args=(rank, world, mode, batch, steps, bf16, out))
        for rank in range(world)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join()
    rates = [out.get() for _ in processes]
    print(mode, world, round(sum(rates)), [round(r) for r in rates])


if __name__ == "__main__":
    main()
