"""Training: the loop (:mod:`~babelspace.training.trainer`), its typed config, the setup before the first
step (:mod:`~babelspace.training.setup`), the state carried across restarts
(:mod:`~babelspace.training.state`) and what a run leaves in its output folder
(:mod:`~babelspace.training.output.folder`)."""
