"""hydra/sweeper=tune: a `--multirun` sweep as a Ray Tune experiment.

Hydra's sweep syntax (comma lists, choice, range, interval, tag(log, interval)) from the
command line and hydra.sweeper.params becomes Tune's search space (`space`); each trial is an
ordinary run of the product (`trial`: run.py's task function through Hydra's run_job, in the
sweep subdir <trial number>/, with all its outputs and trial.json), placed by `placement`; the
epoch loop reports every epoch's metrics to Tune's scheduler (runner/training/reporting.py),
and a trial that ASHA stops ends its epoch, writes its outputs and is reported `pruned`
(`board`: the verdicts and trial numbers). `results` writes the sweep's report; `sweeper`
holds them together. Tune's experiment state lives in <sweep dir>/.tune (resume:
hydra.sweeper.resume=true). The settings' schema is `TuneSweeperConfig` in runner/config/sweeper.py.
"""
