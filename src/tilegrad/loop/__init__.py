"""Loop IR: the imperative form of a scheduled computation, its lowering, simplification and printing."""

from .ir import Allocate as Allocate, Buffer as Buffer, For as For, IfThenElse as IfThenElse, Kernel as Kernel
from .ir import Seq as Seq, Store as Store
from .lower import lower as lower
from .printer import format_kernel as format_kernel, format_stmt as format_stmt
