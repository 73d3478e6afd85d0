"""Pastes bench-results/figures.md into README.md between the bench markers."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
readme = (ROOT / "README.md").read_text()
table = (ROOT / "bench-results" / "figures.md").read_text().strip()
start, end = "<!-- bench:start -->", "<!-- bench:end -->"
head, rest = readme.split(start)
_, tail = rest.split(end)
(ROOT / "README.md").write_text(f"{head}{start}\n{table}\n{end}{tail}")
print("README figures updated")
