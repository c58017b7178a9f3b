"""How failures, checkpoints and restarts stretch a training run (``podsim goodput``): a pure
model with no engine, fed the step time the simulation gives.

* :mod:`.rates` -- failure kinds and their rates (the shipped ``defaults.yaml``, each rate with
  its source; a user's YAML replaces kinds);
* :mod:`.checkpoint` -- a checkpoint's bytes (podsim's memory model) and what it costs: sync,
  async, in memory;
* :mod:`.restart` -- what a failure costs besides the lost work;
* :mod:`.goodput` -- the closed forms: expected goodput, the optimum interval, Young's and Daly's;
* :mod:`.estimate` -- those on a whole run (:class:`~.estimate.RunModel`);
* :mod:`.montecarlo` -- the seeded, vectorised Monte Carlo of the time to train;
* :mod:`.whatif` -- hot spares, async or in-memory checkpoints, faster storage.
"""
