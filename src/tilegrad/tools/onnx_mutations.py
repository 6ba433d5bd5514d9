"""The fuzzer's mutations (`onnx_fuzz.py`): each changes a case's model in place, as a broken exporter or a
hostile file would, and says what it did in a few words. Each draws only from the generator it is given."""

from __future__ import annotations

import numpy as np
from onnx import AttributeProto, TensorProto, helper

ODD_INTS = (-(2**40), -5, -1, 0, 1, 2, 3, 7, 64, 2**20, 2**31, 10**12, 2**62)
ODD_FLOATS = (float("nan"), float("inf"), -1.0, 0.0, 1e-30, 1e30)
ELEM_TYPES = (0, 1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 13, 14, 16, 17, 21, 99)
OP_TYPES = ("Relu", "Add", "MatMul", "Conv", "Reshape", "Transpose", "Concat", "Gather", "Softmax", "Mod",
            "NonMaxSuppression", "Loop", "Identity", "Expand", "Tile", "Slice", "Split", "ReduceSum", "Cast",
            "Unsqueeze", "Squeeze", "Pad", "Resize", "Einsum", "TopK", "Frobnicate", "RandomNormalLike")
OPSETS = (0, 1, 6, 7, 9, 10, 11, 12, 13, 17, 18, 21, 99, 10**6)


def _pick(rng, seq):
    return seq[int(rng.integers(len(seq)))]


def _value_names(g) -> list[str]:
    names = [vi.name for vi in g.input] + [t.name for t in g.initializer]
    return names + [y for n in g.node for y in n.output if y]


def dims(case, rng) -> str:
    """A declared dimension of an input or output changed (zero, negative, huge, symbolic), or its rank."""
    g = case.model.graph
    vi = _pick(rng, list(g.input) + list(g.output))
    shape = vi.type.tensor_type.shape
    if not shape.dim or rng.random() < 0.2:
        shape.dim.add().dim_value = int(_pick(rng, (1, 2, 3)))
        return f"{vi.name}: a dimension added"
    d = shape.dim[int(rng.integers(len(shape.dim)))]
    choice = int(rng.integers(4))
    if choice == 0:
        d.dim_param = _pick(rng, ("N", "batch", "", "seq len"))
        return f"{vi.name}: a symbolic dimension {d.dim_param!r}"
    if choice == 1:
        del shape.dim[-1]
        return f"{vi.name}: its last dimension dropped"
    d.dim_value = int(_pick(rng, ODD_INTS if choice == 2 else (0, -1, 10**6, 10**12)))
    return f"{vi.name}: a dimension set to {d.dim_value}"


def dtype(case, rng) -> str:
    """The element type of an input, output or initializer changed, its data left as it was."""
    g = case.model.graph
    t = _pick(rng, list(g.input) + list(g.output) + list(g.initializer))
    new = int(_pick(rng, ELEM_TYPES))
    if isinstance(t, TensorProto):
        t.data_type = new
    else:
        t.type.tensor_type.elem_type = new
    return f"{t.name}: element type {new}"


def attribute(case, rng) -> str:
    """An attribute's value, kind or presence changed, or an unknown one added."""
    node = _pick(rng, list(case.model.graph.node))
    if not node.attribute or rng.random() < 0.2:
        node.attribute.append(helper.make_attribute(_pick(rng, ("foo", "axis", "perm", "to")),
                                                    int(_pick(rng, ODD_INTS))))
        return f"{node.name}: attribute {node.attribute[-1].name!r} added"
    i = int(rng.integers(len(node.attribute)))
    a = node.attribute[i]
    choice = int(rng.integers(5))
    if choice == 0:
        del node.attribute[i]
        return f"{node.name}: attribute {a.name!r} removed"
    if choice == 1 or a.type == AttributeProto.INT:
        node.attribute[i].CopyFrom(helper.make_attribute(a.name, int(_pick(rng, ODD_INTS))))
    elif a.type == AttributeProto.INTS:
        n = int(rng.integers(0, 6))
        values = [int(_pick(rng, ODD_INTS)) for _ in range(n)]
        node.attribute[i].CopyFrom(helper.make_attribute(a.name, values, attr_type=AttributeProto.INTS))
    elif a.type == AttributeProto.FLOAT or choice == 2:
        node.attribute[i].CopyFrom(helper.make_attribute(a.name, float(_pick(rng, ODD_FLOATS))))
    else:
        node.attribute[i].CopyFrom(helper.make_attribute(a.name, _pick(rng, ("", "bogus", *HOSTILE))))
    return f"{node.name}: attribute {a.name!r} set to {helper.get_attribute_value(node.attribute[i])!r:.40}"


def edge(case, rng) -> str:
    """The graph's wiring broken: an input rewired, added or removed, nodes reordered or dropped, an output
    redefined or left undefined."""
    g = case.model.graph
    node = _pick(rng, list(g.node))
    choice = int(rng.integers(6))
    if choice == 0 and node.input:
        i = int(rng.integers(len(node.input)))
        node.input[i] = _pick(rng, _value_names(g) + ["missing", ""])
        return f"{node.name}: input {i} is now {node.input[i]!r}"
    if choice == 1:
        node.input.append(_pick(rng, _value_names(g)))
        return f"{node.name}: an input added"
    if choice == 2 and node.input:
        node.input.pop()
        return f"{node.name}: its last input removed"
    if choice == 3 and len(g.node) > 1:
        i, j = (int(k) for k in rng.choice(len(g.node), 2, replace=False))
        a, b = type(g.node[i])(), type(g.node[j])()
        a.CopyFrom(g.node[i])
        b.CopyFrom(g.node[j])
        g.node[i].CopyFrom(b)
        g.node[j].CopyFrom(a)
        return f"nodes {i} and {j} swapped"
    if choice == 4 and len(g.node) > 1:
        k = int(rng.integers(len(g.node)))
        del g.node[k]
        return f"node {k} removed"
    node.output[0] = _pick(rng, _value_names(g) + ["y"])
    return f"{node.name}: output is now {node.output[0]!r}"


def name(case, rng) -> str:
    """A value renamed everywhere (consistently) or a node renamed, to C code, odd characters or a clash."""
    g = case.model.graph
    new = _pick(rng, HOSTILE)
    if rng.random() < 0.3:
        node = _pick(rng, list(g.node))
        node.name = new if rng.random() < 0.7 else _pick(rng, [n.name for n in g.node])
        return f"node renamed {node.name[:30]!r}"
    old = _pick(rng, _value_names(g))
    for vi in [*g.input, *g.output, *g.initializer]:
        if vi.name == old:
            vi.name = new
    for n in g.node:
        n.input[:] = [new if x == old else x for x in n.input]
        n.output[:] = [new if y == old else y for y in n.output]
    return f"value {old!r} renamed {new[:30]!r}"


def initializer(case, rng) -> str:
    """An initializer's dims or data made inconsistent: dims changed, data cut short, huge or negative dims."""
    g = case.model.graph
    if not g.initializer:
        return "no initializer"
    t = _pick(rng, list(g.initializer))
    choice = int(rng.integers(4))
    if choice == 0 and t.HasField("raw_data"):
        t.raw_data = t.raw_data[: len(t.raw_data) // 2]
        return f"{t.name}: data cut in half"
    if choice == 1:
        t.dims[:] = [int(_pick(rng, (10**6, 10**12, -3, 0)))] + list(t.dims)[1:]
        return f"{t.name}: dims {list(t.dims)}"
    if choice == 2:
        t.dims.append(int(_pick(rng, (1, 2))))
        return f"{t.name}: a dimension added"
    t.ClearField("raw_data")
    t.float_data[:] = [1.0, 2.0]
    return f"{t.name}: float_data of 2 values"


def external(case, rng) -> str:
    """An initializer moved to external data: a file beside the model (valid, short, or missing), or one
    outside its directory (absolute, `..`): those must be refused."""
    g = case.model.graph
    if not g.initializer:
        return "no initializer"
    t = _pick(rng, list(g.initializer))
    data = t.raw_data if t.HasField("raw_data") else np.zeros(1, "float32").tobytes()
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    choice = int(rng.integers(6))
    location = {0: "weights.bin", 1: "weights.bin", 2: "gone.bin", 3: "../secret.bin", 4: "/etc/hostname",
                5: "sub/../../secret.bin"}[choice]
    info = {"location": location}
    if choice == 1:
        info.update(offset=str(int(_pick(rng, (-1, 3, 10**9)))), length=str(len(data)))
    for key, value in info.items():
        entry = t.external_data.add()
        entry.key, entry.value = key, value
    if choice in (0, 1):
        case.beside["weights.bin"] = data
    case.outside["secret.bin"] = data
    case.hostile = choice >= 3
    return f"{t.name}: external data at {location!r}"


def opset(case, rng) -> str:
    """The default domain's opset version changed or removed, or the IR version changed."""
    m = case.model
    choice = int(rng.integers(3))
    if choice == 0:
        del m.opset_import[:]
        return "no opset import"
    if choice == 1:
        m.ir_version = int(_pick(rng, (0, 1, 3, 7, 99)))
        return f"ir_version {m.ir_version}"
    if not m.opset_import:
        m.opset_import.add()
    m.opset_import[0].version = int(_pick(rng, OPSETS))
    return f"opset {m.opset_import[0].version}"


def op_type(case, rng) -> str:
    """A node's op type or domain changed."""
    node = _pick(rng, list(case.model.graph.node))
    if rng.random() < 0.2:
        node.domain = _pick(rng, ("com.microsoft", "ai.onnx", "bogus"))
        return f"{node.name}: domain {node.domain!r}"
    node.op_type = _pick(rng, OP_TYPES)
    return f"{node.name}: op {node.op_type}"


def shape_constant(case, rng) -> str:
    """An int64 initializer (a shape, axes, repeats, pads) given odd values: huge, negative, zero."""
    ints = [t for t in case.model.graph.initializer if t.data_type == TensorProto.INT64]
    if not ints:
        return "no int64 initializer"
    t = _pick(rng, ints)
    count = min(max(1, int(np.prod(t.dims))), 8)
    values = np.array([int(_pick(rng, ODD_INTS)) for _ in range(count)], "int64")
    t.raw_data = values.tobytes()
    return f"{t.name}: values {values.tolist()}"


def nudge(case, rng) -> str:
    """A small plausible change: an integer attribute, an int64 constant or an input dimension moved by a step,
    so that the model often stays valid and reaches compilation and the comparison with ONNX Runtime."""
    g = case.model.graph
    choice = int(rng.integers(3))
    delta = int(_pick(rng, (-2, -1, 1, 2)))
    ints = [(n, i) for n in g.node for i, a in enumerate(n.attribute) if a.type in (AttributeProto.INT,
                                                                                     AttributeProto.INTS)]
    if choice == 0 and ints:
        node, i = _pick(rng, ints)
        a = node.attribute[i]
        if a.type == AttributeProto.INT:
            a.i += delta
        elif a.ints:
            a.ints[int(rng.integers(len(a.ints)))] += delta
        return f"{node.name}: attribute {a.name!r} moved by {delta}"
    consts = [t for t in g.initializer
              if t.data_type == TensorProto.INT64 and t.HasField("raw_data") and len(t.raw_data) % 8 == 0]
    if choice == 1 and consts:
        t = _pick(rng, consts)
        values = np.frombuffer(t.raw_data, "int64").copy()
        if values.size:
            values[int(rng.integers(values.size))] += delta
        t.raw_data = values.tobytes()
        return f"{t.name}: values {values.tolist()[:8]}"
    vi = _pick(rng, list(g.input))
    dims = [d for d in vi.type.tensor_type.shape.dim if d.HasField("dim_value")]
    if not dims:
        return "no static input dimension"
    d = _pick(rng, dims)
    d.dim_value = max(1, d.dim_value + delta)
    return f"{vi.name}: a dimension set to {d.dim_value}"


def computed_constant(case, rng) -> str:
    """A constant computed at import rather than stored: an initializer made by `ConstantOfShape` of its own
    shape (valid), of a shape far beyond memory (to refuse as a limit), or an integer divided by a zero constant."""
    g = case.model.graph
    if not g.initializer:
        return "no initializer"
    t = _pick(rng, list(g.initializer))
    choice = int(rng.integers(3))
    if choice == 2:
        zero = f"{t.name}_zero"
        g.initializer.append(helper.make_tensor(zero, TensorProto.INT64, [], [0]))
        g.initializer.append(helper.make_tensor(f"{t.name}_ints", TensorProto.INT64, [2], [7, 9]))
        op = _pick(rng, ("Div", "Mod"))
        g.node.insert(0, helper.make_node(op, [f"{t.name}_ints", zero], [f"{t.name}_quotient"],
                                          name=f"{t.name}_by_zero"))
        g.output.append(helper.make_tensor_value_info(f"{t.name}_quotient", TensorProto.INT64, [2]))
        return f"{op} of int64 constants by a constant zero"
    dims = list(t.dims) if choice == 0 else [10**10] + list(t.dims)[1:]
    shape = f"{t.name}_shape"
    g.initializer.append(helper.make_tensor(shape, TensorProto.INT64, [len(dims)], dims))
    numeric = t.data_type in ELEM_TYPES and t.data_type not in (0, TensorProto.STRING, 99)  # make_tensor takes 1
    fill = helper.make_tensor("value", t.data_type if numeric else TensorProto.FLOAT, [1], [1])
    g.node.insert(0, helper.make_node("ConstantOfShape", [shape], [t.name], name=f"{t.name}_fill", value=fill))
    g.initializer.remove(t)
    return f"{t.name}: computed by ConstantOfShape{dims}"


def duplicate(case, rng) -> str:
    """Something that must be unique listed twice: a graph input, an initializer (the same or other data) or a
    node's name."""
    g = case.model.graph
    choice = int(rng.integers(3))
    if choice == 0 and g.input:
        g.input.append(_pick(rng, list(g.input)))
        return f"graph input {g.input[-1].name!r} listed twice"
    if choice == 1 and g.initializer:
        t = _pick(rng, list(g.initializer))
        again = g.initializer.add()
        again.CopyFrom(t)
        if rng.random() < 0.5 and t.HasField("raw_data"):
            again.raw_data = bytes(reversed(t.raw_data))
            return f"initializer {t.name!r} listed twice, the second with its bytes reversed"
        return f"initializer {t.name!r} listed twice"
    if len(g.node) > 1:
        g.node[1].name = g.node[0].name
        return f"node name {g.node[0].name!r} used twice"
    return "nothing to duplicate"


HOSTILE = ('x"); system("rm -rf /"); //', "*/ int main(){} /*", "a\nb", "%s%n%x", "ünï©ødé", "0", "-",
           "a" * 5000, "\\", "k0_relu", "args", "tg_run")
MUTATIONS = {"dims": dims, "dtype": dtype, "attribute": attribute, "edge": edge, "name": name,
             "initializer": initializer, "external": external, "opset": opset, "op_type": op_type,
             "shape_constant": shape_constant, "nudge": nudge, "nudge again": nudge,
             "computed_constant": computed_constant, "duplicate": duplicate}
