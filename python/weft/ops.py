"""Every op Weft registers, as a function: ``weft.ops.matmul(a, b)``.

The functions are made from the op registry when the module is imported,
so this module has exactly the ops the core has. An op ``MatMul`` is
``matmul`` here (CamelCase to snake_case, ``Conv2D`` -> ``conv2d``,
``MatMul`` -> ``matmul``; a Python keyword gets a trailing underscore:
``assert_``); :func:`op` calls any op by its registry name.

A function takes the op's inputs (positionally or by name; a list for a
list input), then ``name=`` and the op's attrs as keywords. Inputs that
are not tensors (numbers, lists, arrays) become constants of the dtype
the op expects there. It returns the output tensor, a tuple of them for
ops with several outputs, or the node itself for ops without outputs
(usable as a control dependency or a target). Each function's docstring
is the op's signature and documentation.
"""

import keyword
import re

from . import _weft
from .errors import InvalidArgumentError, NotFoundError
from .graph import Tensor, Variable, _graph_of, as_array, constant

_DEFS = {d["name"]: d for d in _weft._op_defs()}


def snake_case(name):
    """MatMul -> matmul, Conv2DBackpropInput -> conv2d_backprop_input."""
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z])([A-Z])", r"\1_\2", s)
    s = re.sub(r"([0-9])([A-Z][a-z])", r"\1_\2", s).lower()
    s = s.replace("mat_mul", "matmul")
    return s + "_" if keyword.iskeyword(s) else s


def _to_tensor(value, dtype, graph, what):
    if isinstance(value, Tensor):
        return value  # from another graph: the node's check says so
    if isinstance(value, Variable):
        return value.value()
    return constant(as_array(value, dtype, what), dtype, graph=graph)


def _bind(d, args, kwargs):
    """The op's inputs from |args| and |kwargs| (which keeps the attrs)."""
    inputs = d["inputs"]
    if len(args) > len(inputs):
        raise InvalidArgumentError("%s takes %d inputs (%s), not %d" % (
            d["name"], len(inputs), ", ".join(i["name"] for i in inputs), len(args)))
    values = list(args)
    for spec in inputs[len(args):]:
        if spec["name"] not in kwargs:
            raise InvalidArgumentError("%s: input '%s' is missing (%s)" % (d["name"], spec["name"], d["signature"]))
        values.append(kwargs.pop(spec["name"]))
    return values


def _dtype_hints(d, values, attrs):
    """The dtype each input should have where it is not yet a tensor."""
    bound = dict(attrs)
    for spec, v in zip(d["inputs"], values):
        attr = spec["type_attr"]
        if not attr or attr in bound:
            continue
        items = v if spec["is_list"] and isinstance(v, (list, tuple)) else [v]
        for item in items:
            if isinstance(item, Tensor):
                bound[attr] = item.dtype
                break
            if isinstance(item, Variable):
                bound[attr] = item.dtype
                break
    hints = []
    for spec in d["inputs"]:
        hints.append(spec["fixed_type"] or bound.get(spec["type_attr"]))
    return hints


def op(op_name, *args, name=None, **kwargs):
    """Adds a node of |op_name| (the registry's name, "MatMul")."""
    d = _DEFS.get(op_name)
    if d is None:
        raise NotFoundError("no op '%s' is registered" % op_name)
    values = _bind(d, args, kwargs)
    attrs = kwargs
    graph = _graph_of(values)
    hints = _dtype_hints(d, values, attrs)
    inputs = []
    for spec, v, hint in zip(d["inputs"], values, hints):
        what = "%s: input '%s'" % (op_name, spec["name"])
        if spec["is_list"]:
            if not isinstance(v, (list, tuple)):
                raise InvalidArgumentError("%s is a list of tensors" % what)
            inputs.append([_to_tensor(item, hint, graph, what) for item in v])
        else:
            inputs.append(_to_tensor(v, hint, graph, what))
    outs = graph._add_node(op_name, inputs, attrs, name or "")
    return outs[0] if len(outs) == 1 else tuple(outs)


def _make(d):
    op_name = d["name"]

    def fn(*args, name=None, **kwargs):
        return op(op_name, *args, name=name, **kwargs)

    fn.__name__ = snake_case(op_name)
    fn.__qualname__ = fn.__name__
    attrs = "".join("\n    %s" % a["spec"] for a in d["attrs"])
    fn.__doc__ = "%s\n\n%s%s" % (d["signature"], d["doc"], ("\n\nAttrs:" + attrs) if attrs else "")
    return fn


__all__ = ["op", "snake_case"]
for _d in _DEFS.values():
    if _d["name"].startswith("_"):
        continue  # the runtime's own (_Send, _Recv, _Arg, _Retval)
    _fn = _make(_d)
    globals()[_fn.__name__] = _fn
    __all__.append(_fn.__name__)


# --- Operators on tensors ------------------------------------------------------

def _binary(op_name, reverse=False):
    def method(self, other):
        if op_name not in _DEFS:
            return NotImplemented
        return op(op_name, other, self) if reverse else op(op_name, self, other)
    return method


def _install_operators():
    pairs = {"__add__": "Add", "__sub__": "Sub", "__mul__": "Mul", "__truediv__": "RealDiv",
             "__matmul__": "MatMul", "__pow__": "Pow", "__lt__": "Less", "__le__": "LessEqual",
             "__gt__": "Greater", "__ge__": "GreaterEqual", "__and__": "LogicalAnd", "__or__": "LogicalOr"}
    for method, name in pairs.items():
        if name in _DEFS:
            setattr(Tensor, method, _binary(name))
            if method in ("__add__", "__sub__", "__mul__", "__truediv__", "__matmul__", "__pow__"):
                setattr(Tensor, "__r" + method[2:], _binary(name, reverse=True))
    if "Neg" in _DEFS:
        Tensor.__neg__ = lambda self: op("Neg", self)
    if "LogicalNot" in _DEFS:
        Tensor.__invert__ = lambda self: op("LogicalNot", self)


_install_operators()
