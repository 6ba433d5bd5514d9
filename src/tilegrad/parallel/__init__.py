"""Auto-parallel training (MindSpore §3.1) on torch.distributed: sharding strategies and layouts, redistribution,
the cost model and search, pipeline and optimizer-state sharding, executed on N processes."""
