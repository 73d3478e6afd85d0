"""Pastes bench-results/figures.md into docs/benchmarks.md between the bench markers."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
readme = (ROOT / "docs" / "benchmarks.md").read_text()
table = (ROOT / "bench-results" / "figures.md").read_text().strip()
start, end = "<!-- bench:start -->", "<!-- bench:end -->"
head, rest = readme.split(start)
_, tail = rest.split(end)
(ROOT / "docs" / "benchmarks.md").write_text(f"{head}{start}\n{table}\n{end}{tail}")
print("docs/benchmarks.md figures updated")
