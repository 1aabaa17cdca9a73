"""Training checkpoints, in one package: where they are and which are complete (:mod:`.files`),
saving and loading them safely (:mod:`.checkpoint`), and the parts accelerate writes and reads
(:mod:`.accelerated`). What a run keeps across a restart and the checks before resuming it are the
trainer's (:mod:`babelspace.training.state`)."""
