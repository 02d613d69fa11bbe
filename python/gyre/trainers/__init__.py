"""Adapters from gyre's admitted rows to what each trainer's training step consumes, keeping the
loss contract (docs/format.md §6): every target of execution ``i`` weighs ``1 / (L_i · B)`` in the step's
loss, whatever the trainer's own aggregation, micro-batching and data parallelism.

One module each, each callable (``gyre.trainers.verl(rows)``) and with the same function as
``adapt`` (``gyre.trainers.verl.adapt(rows)``, for type checkers):

* ``verl``: a ``DataProto`` (token-level advantages with the coefficient folded in);
* ``slime``: ``Sample``\\ s with ``rollout_id`` = execution, and the reward post-processing hook;
* ``skyrl``: a step-wise ``GeneratorOutput`` and the ``gyre`` advantage estimator;
* ``prime_rl``: ``TrainingSample``-shaped dicts with ``rl_weights`` = ``weight · N / B``;
* ``trl``: the inputs an overridden ``GRPOTrainer._generate_and_score_completions`` returns;
* ``packing``: packed sequences under a token budget (``cu_seqlens``, per-row ``position_ids``,
  coefficients aligned), with the prefix-repeat figure and a hook for prefix-shared forward passes.

Give each adapter one optimizer step's rows (``rows.steps(executions=N)``; a whole batch is one
step) or one rank's shard of a step (``step.shard(world_size=K)[rank]``). docs/trainers.md has,
per trainer, the settings to use and the ones that break the contract.
"""

