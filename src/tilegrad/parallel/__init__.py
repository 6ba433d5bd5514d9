"""Auto-parallel training (MindSpore §3.1) on torch.distributed: sharding strategies and layouts, redistribution,
the cost model and search, pipeline and optimizer-state sharding, executed on N processes."""

from .apply import ShardedProgram as ShardedProgram
from .calibrate import measured_machine as measured_machine
from .capture import capture as capture
from .cost import Link as Link
from .cost import Machine as Machine
from .train_graph import TrainGraph as TrainGraph
from .train_graph import TrainGraphBuilder as TrainGraphBuilder
from .launch import run_workers as run_workers
from .layout import Layout as Layout
from .redistribution import Redistribution as Redistribution
from .search import Plan as Plan
from .search import Problem as Problem
from .search import data_parallel as data_parallel
from .search import propagate as propagate
from .search import search as search
from .topology import Topology as Topology
from .topology import plan_cluster as plan_cluster
