"""Job specs: what a user asks podsim to run, as typed dataclasses whose fields declare their
flags (:mod:`podsim.params`).  The command line, the sweep, the JSON echo of the inputs and
the docs' flag tables are generated from these fields; :mod:`podsim.api` runs them.

* :mod:`.hardware` -- the GPU and the cluster a job runs on;
* :mod:`.model` -- a zoo model or a HuggingFace-style config;
* :mod:`.outputs` -- the files a run writes (not sweep parameters);
* :mod:`.train` -- one training iteration (``podsim llm``): model, hardware, layout, options.
"""
