"""Tensor expressions: the expression system, its simplifier and evaluators, and computes over tensors."""

# First: these two register how every expression prints and bounds itself (te/expr.py, `DERIVED`).
from .intervals import interval as interval
from .printer import format_expr as format_expr
from .evaluate import evaluate as evaluate, evaluate_numpy as evaluate_numpy
from .expr import (
    Expr as Expr, Var as Var, Const as Const, const as const, cast as cast, select as select,
    minimum as minimum, maximum as maximum, exp as exp, log as log, sqrt as sqrt, rsqrt as rsqrt, tanh as tanh,
    erf as erf, sigmoid as sigmoid, abs_ as abs, power as power, floor as floor, ceil as ceil, round_ as round,
    sin as sin, cos as cos, all_of as all_of, logical_and as logical_and, logical_or as logical_or,
    logical_not as logical_not, substitute as substitute, free_vars as free_vars, ceildiv as ceildiv,
)
from .simplify import simplify as simplify
from .tensor import (
    Tensor as Tensor, ComputeOp as ComputeOp, PlaceholderOp as PlaceholderOp, placeholder as placeholder,
    compute as compute, reduce_axis as reduce_axis, sum as sum, max as max, min as min, prod as prod,
    Reducer as Reducer, fold as fold, logsumexp as logsumexp,
)
from .interpret import interpret as interpret
from . import nn as nn
