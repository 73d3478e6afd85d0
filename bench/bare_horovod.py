"""bench/parallel_ceiling.py's bare loop through Horovod (its DistributedOptimizer, no runner):
what Horovod's own machinery costs two workers on two cores (issue 32). Each rank prints its
samples/s. Not a product feature; results in docs/benchmarks.md.

usage: horovodrun -np 2 -H localhost:2 --gloo python bench/bare_horovod.py BATCH STEPS [PRECISION]
"""

from __future__ import annotations

import sys

import horovod.torch as hvd
import torch
from parallel_ceiling import bare_model, rate


def main() -> None:
    hvd.init()
    batch, steps = int(sys.argv[1]), int(sys.argv[2])
    bf16 = sys.argv[3:4] == ["bf16"]
    torch.set_num_threads(1)
    model, x, y = bare_model(batch)
    optimizer = hvd.DistributedOptimizer(
        torch.optim.AdamW(model.parameters(), 1e-3), named_parameters=model.named_parameters()
    )
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    print("rank", hvd.rank(), round(rate(model, optimizer, x, y, bf16, steps)), flush=True)


if __name__ == "__main__":
    main()
