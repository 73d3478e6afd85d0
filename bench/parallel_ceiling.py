"""What two cores give two independent training processes at this moment: the ceiling for
2-worker scaling. A bare PyTorch loop (3 x 512 MLP, one thread, one fixed in-memory batch)
prints its samples/s; the bench runs it alone, then twice at once, and compares the sums.
PRECISION (32 or bf16) is the autocast of its steps: the one the trainers' steps run in
(trainer.precision=auto), so that the ceiling is of the same arithmetic. Not a product feature.

usage: python bench/parallel_ceiling.py BATCH STEPS [PRECISION]
"""

import sys
import time

import torch


def main() -> None:
    batch, steps = int(sys.argv[1]), int(sys.argv[2])
    bf16 = sys.argv[3:4] == ["bf16"]
    torch.set_num_threads(1)
    torch.manual_seed(0)
    width, inputs = 512, 40
    layers = [torch.nn.Linear(inputs, width), torch.nn.ReLU()]
    for _ in range(2):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(width, 1))
    optimizer = torch.optim.AdamW(model.parameters(), 1e-3)
    x, y = torch.randn(batch, inputs), torch.randint(0, 2, (batch, 1)).float()

    def step() -> None:
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits = model(x)
        torch.nn.functional.binary_cross_entropy_with_logits(logits.float(), y).backward()
        optimizer.step()

    for _ in range(3):
        step()
    started = time.perf_counter()
    for _ in range(steps):
        step()
    print(batch * steps / (time.perf_counter() - started))


if __name__ == "__main__":
    main()
