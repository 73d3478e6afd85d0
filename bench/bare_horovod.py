"""bench/parallel_ceiling.py's bare loop through Horovod (no runner): what Horovod's own
machinery costs two workers on two cores (issue 32). Each rank prints its samples/s. Not a
product feature; results in docs/benchmarks.md.

usage: horovodrun -np 2 -H localhost:2 --gloo python bench/bare_horovod.py BATCH STEPS [PRECISION [EXCHANGE]]
    EXCHANGE: optimizer (default: DistributedOptimizer, one allreduce per gradient tensor,
    started by backward's hooks), grouped (the same with groups=1: one grouped allreduce),
    flat (no hooks: every gradient in one buffer, one allreduce_ after backward)
"""

from __future__ import annotations

import sys

import horovod.torch as hvd
import torch
from parallel_ceiling import bare_model, rate

EXCHANGES = ("optimizer", "grouped", "flat")


def main() -> None:
    exchange_name = sys.argv[4] if len(sys.argv) > 4 else "optimizer"
    if exchange_name not in EXCHANGES:
        sys.exit(f"error: EXCHANGE is {exchange_name!r}; use one of: {', '.join(EXCHANGES)}")
    hvd.init()
    batch, steps = int(sys.argv[1]), int(sys.argv[2])
    bf16 = sys.argv[3:4] == ["bf16"]
    torch.set_num_threads(1)
    model, x, y = bare_model(batch)
    params = list(model.parameters())
    optimizer = torch.optim.AdamW(params, 1e-3)
    exchange = None
    if exchange_name == "flat":

        def exchange() -> None:
            flat = torch.cat([p.grad.reshape(-1) for p in params])
            hvd.allreduce_(flat, op=hvd.Average, name="flat")
            offset = 0
            for p in params:
                p.grad.copy_(flat[offset : offset + p.numel()].view_as(p))
                offset += p.numel()

    else:
        optimizer = hvd.DistributedOptimizer(
            optimizer,
            named_parameters=model.named_parameters(),
            groups=1 if exchange_name == "grouped" else None,
        )
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    print(
        "rank", hvd.rank(), round(rate(model, optimizer, x, y, bf16, steps, exchange)), flush=True
    )


if __name__ == "__main__":
    main()
