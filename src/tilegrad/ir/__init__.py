"""Graph IR and the op registry."""

from .graph import Graph as Graph, GraphBuilder as GraphBuilder, Node as Node, Value as Value
from .registry import OPS as OPS, OpDef as OpDef, TensorType as TensorType, declare as declare, lookup as lookup
