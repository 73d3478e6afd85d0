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


def bare_model(batch: int) -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor]:
    """The 3 x 512 MLP and one fixed batch (bench/sync_ceiling.py and bare_horovod.py too)."""
    torch.manual_seed(0)
    width, inputs = 512, 40
    layers = [torch.nn.Linear(inputs, width), torch.nn.ReLU()]
    for _ in range(2):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(width, 1))
    return model, torch.randn(batch, inputs), torch.randint(0, 2, (batch, 1)).float()


def backward(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, bf16: bool) -> None:
    """One forward and backward pass, the steps under bf16 autocast where asked."""
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        logits = model(x)
    torch.nn.functional.binary_cross_entropy_with_logits(logits.float(), y).backward()


def rate(model, optimizer, x, y, bf16: bool, steps: int, exchange=None, ready=None) -> float:
    """Samples/s over `steps` steps after 3 warm-up steps; `exchange()` runs between each
    backward pass and its optimizer step, `ready()` once before the timed steps."""

    def step() -> None:
        optimizer.zero_grad()
        backward(model, x, y, bf16)
        if exchange is not None:
            exchange()
        optimizer.step()

    for _ in range(3):
        step()
    if ready is not None:
        ready()
    started = time.perf_counter()
    for _ in range(steps):
        step()
    return len(x) * steps / (time.perf_counter() - started)


def main() -> None:
    batch, steps = int(sys.argv[1]), int(sys.argv[2])
    bf16 = sys.argv[3:4] == ["bf16"]
    torch.set_num_threads(1)
    model, x, y = bare_model(batch)
    optimizer = torch.optim.AdamW(model.parameters(), 1e-3)

    print(rate(model, optimizer, x, y, bf16, steps))


if __name__ == "__main__":
    main()
