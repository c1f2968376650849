"""What a program costs: the cost pass (``costing``) that turns a program's shapes into cycles once, before an
executor runs it, and the costs it is made of — an iteration's batches (``batch_costs``), hand-offs between
stages (``handoffs``), the production stack's kernels (``software``), MoE dispatch and expert trips
(``expert_dispatch``, ``moe_serving``), a draft's and a prefill pool's stations (``speculative``,
``split_prefill``) and a GPU's (``gpu_serving``, ``gpu_training``)."""
