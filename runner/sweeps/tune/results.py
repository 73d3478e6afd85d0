"""The sweep's report from Tune's results, with the chart of every trial's epochs."""

from __future__ import annotations

from pathlib import Path

from runner.sweeps.tune.board import trial_number
from runner.sweeps.tune.space import SearchSpace, scheduled_metric


def report_sweep(
    config, sweep_dir: Path, results, space: SearchSpace, objective: str, maximize: bool, board
):
    from runner.reports.html import sweep_report
    from runner.sweeps.report import record_jobs, write_report

    jobs, curves = [], {}
    for result in results:
        trial_id = Path(result.path).name  # trial_dirname
        number = trial_number(board, trial_id)
        frame = result.metrics_dataframe
        if frame is not None and {"objective", "epoch"} <= set(frame.columns):
            curves[number] = frame[["epoch", "objective"]].drop_duplicates("epoch", keep="last")
        params = {k: result.config[k] for k in space.keys if k in result.config}
        error = str(result.error).splitlines()[0] if result.error else ""
        jobs.append(
            {
                "num": number,
                "overrides": space.overrides(params)[len(space.fixed) :],
                "status": "failed" if result.error else "completed",
                "error": error,
                "epochs": result.metrics.get("epoch"),
                "seconds": result.metrics.get("time_total_s"),
            }
        )
    table = write_report(sweep_dir, record_jobs(sweep_dir, jobs), objective, maximize)
    plot_epochs(curves, table, scheduled_metric(objective), sweep_dir / "sweep_epochs.png")
    if len(table):  # again, with the epochs' chart
        sweep_report(sweep_dir, table, objective, maximize)
    return table


def plot_epochs(curves: dict, table, metric: str, path: Path) -> None:
    """The scheduled metric per epoch of every trial: the picture of what the scheduler cut."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    status = dict(zip(table["trial"], table["status"], strict=True)) if len(table) else {}
    fig, ax = plt.subplots(figsize=(6, 4))
    for number, frame in sorted(curves.items()):
        pruned = status.get(number) == "pruned"
        ax.plot(
            frame["epoch"],
            frame["objective"],
            linestyle="--" if pruned else "-",
            marker="x" if pruned else "o",
            label=f"{number} ({status.get(number, '?')})",
        )
    ax.set_xlabel("epoch")
    ax.set_ylabel(metric)
    ax.set_title(f"{metric} per epoch (dashed: pruned)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
