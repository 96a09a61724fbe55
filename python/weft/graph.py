"""Graphs: weft.Graph, its tensors, scopes, constants, variables, control
flow and gradients (docs/python.md, "Graphs")."""

import contextlib
import os
import threading

import numpy as np

from . import _weft
from .errors import InvalidArgumentError

Tensor = _weft.Tensor


class Graph(_weft.Graph):
    """A dataflow graph being built. Every op call adds one node, checked at
    once (dtypes, shapes, attrs); a mistake raises and leaves the graph as
    it was. ``with g.as_default():`` makes ops without tensor inputs
    (constants, placeholders) go into ``g``."""

    def as_default(self):
        """``with g.as_default():`` makes ``g`` the default graph of the
        block (where constants, placeholders and variables go)."""
        return _default_graph(self)

    def __enter__(self):
        self._default = _default_graph(self)
        self._default.__enter__()
        return self

    def __exit__(self, *exc):
        return self._default.__exit__(*exc)

    def __repr__(self):
        return "<weft.Graph of %d nodes>" % self.num_nodes


_stack = threading.local()


def _graphs():
    if not hasattr(_stack, "graphs"):
        _stack.graphs = []
    return _stack.graphs


_global_default = None


def get_default_graph():
    """The graph of the innermost ``with g.as_default()``; else one global
    graph, made on first use."""
    global _global_default
    graphs = _graphs()
    if graphs:
        return graphs[-1]
    if _global_default is None:
        _global_default = Graph()
    return _global_default


def reset_default_graph():
    """Starts a new global default graph (not inside ``as_default``)."""
    global _global_default
    if _graphs():
        raise InvalidArgumentError("reset_default_graph: called inside a graph's as_default()")
    _global_default = Graph()


@contextlib.contextmanager
def _default_graph(graph):
    _graphs().append(graph)
    try:
        yield graph
    finally:
        _graphs().pop()


def _graph_of(values):
    """The graph the tensors among |values| (nested one level) belong to."""
    for v in values:
        if isinstance(v, Tensor):
            return v.graph
        if isinstance(v, (list, tuple)):
            for item in v:
                if isinstance(item, Tensor):
                    return item.graph
    return get_default_graph()


# --- Scopes -----------------------------------------------------------------


@contextlib.contextmanager
def _scope(graph, push, arg):
    push(arg)
    try:
        yield
    finally:
        graph._pop_scope()


def name_scope(name, graph=None):
    """Nodes made in the scope are named "<name>/..." under the current
    scope, the scope's name made unique ("dense", "dense_1"). A name
    ending in "/" ("dense1/kernel/") is the whole prefix, as it is: to add
    nodes beside ones made earlier ("/" alone: the top level)."""
    g = graph or get_default_graph()
    return _scope(g, g._push_name_scope, name)


def device(name, graph=None):
    """Nodes made in the scope ask for device |name| ("/device:CPU:0")."""
    g = graph or get_default_graph()
    return _scope(g, g._push_device_scope, name)


def control_dependencies(deps, graph=None):
    """Nodes made in the scope run after every node of |deps|."""
    deps = list(deps)
    g = graph or _graph_of(deps)
    return _scope(g, g._push_control_dependencies, deps)


# --- Constants, placeholders, variables ---------------------------------------


def _canonical(dtype):
    return None if dtype is None else _weft._canonical_dtype(dtype)


def as_array(value, dtype=None, what="value"):
    """|value| as the NumPy array a Const holds: Python floats are f32 and
    ints i64 unless |dtype| says otherwise; an ndarray keeps its dtype and
    must match |dtype| when one is given."""
    dtype = _canonical(dtype)
    if isinstance(value, np.ndarray):
        if dtype is not None and dtype not in ("bf16", "string") and _canonical(value.dtype) != dtype:
            raise InvalidArgumentError("%s: the array is %s, %s is wanted; convert it (array.astype)"
                                       % (what, _canonical(value.dtype), dtype))
        return value
    if dtype is not None and dtype not in ("bf16", "string"):
        return np.asarray(value, dtype=_numpy_dtype(dtype))
    array = np.asarray(value)
    if dtype == "string" or array.dtype.kind in "USO":
        return array.astype(object)
    if array.dtype == np.float64 and not isinstance(value, np.generic):
        return array.astype(np.float32)
    if array.dtype.kind == "i" and not isinstance(value, np.generic):
        return array.astype(np.int64)
    return array


_NUMPY = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i8": np.int8, "i16": np.int16,
          "i32": np.int32, "i64": np.int64, "u8": np.uint8, "bool": np.bool_}


def _numpy_dtype(dtype):
    try:
        return _NUMPY[dtype]
    except KeyError:
        raise InvalidArgumentError("dtype %s has no NumPy dtype" % dtype) from None


def constant(value, dtype=None, name=None, graph=None):
    """A Const node holding |value| (copied), of |dtype| when given."""
    g = graph or get_default_graph()
    dtype = _canonical(dtype)
    if dtype == "bf16":
        # NumPy has no bf16: the value goes in as f32 and is cast.
        c = constant(value, "f32", None if name is None else name + "/f32", g)
        return g._add_node("Cast", [c], {"DstT": "bf16"}, name or "")[0]
    array = as_array(value, dtype, "constant")
    return g._add_node("Const", [], {"value": array, "dtype": _canonical(array.dtype) if array.dtype != object
                                     else "string"}, name or "Const")[0]


def placeholder(dtype, shape=None, name=None, graph=None):
    """A value fed at run time (``Session.run(..., {x: array})``). |shape|
    may have None for a dimension known only then; None: any shape."""
    g = graph or get_default_graph()
    return g._add_node("Placeholder", [], {"dtype": dtype, "shape": shape}, name or "Placeholder")[0]


class Variable:
    """A variable: state that lives in the session and survives its runs.

    ``v = weft.Variable(np.zeros(3, np.float32), name="w")`` makes the
    variable (``v.handle``), its initializer (``v.initializer``, an Assign
    of the initial value, run by ``global_variables_initializer()``) and
    ``v.value()``, a read of its value. Assign new values with
    ``v.assign(x)``, ``v.assign_add(x)``, ``v.assign_sub(x)``.

    ``initial_value`` is an array, a number, a tensor, or a function
    returning a tensor, called once to make it under "<name>/init/" (then
    ``dtype`` and ``shape`` are needed): ``weft.Variable(lambda:
    weft.nn.glorot_uniform((784, 10)), "f32", (784, 10), name="w")``.
    """

    def __init__(self, initial_value, dtype=None, shape=None, name=None, graph=None):
        g = graph or _graph_of([initial_value])
        name = name or "Variable"
        make = None
        if callable(initial_value) and not isinstance(initial_value, Tensor):
            # Made after the variable, under "<its name>/init/".
            if dtype is None or shape is None:
                raise InvalidArgumentError("Variable %r: an initial value given as a function needs dtype and shape"
                                           % name)
            make, init = initial_value, None
        elif isinstance(initial_value, Tensor):
            init = initial_value
        else:
            init = constant(initial_value, dtype, name + "/initial_value", g)
        self.dtype = _canonical(dtype) if init is None else init.dtype
        self.shape = tuple(shape) if shape is not None else init.shape
        self.graph = g
        self.handle = g._add_node("VarHandle", [], {"dtype": self.dtype, "shape": self.shape}, name)[0]
        self.name = self.handle.op
        # The variable's own nodes go beside it, whatever scope is open.
        with name_scope(self.name + "/", g):
            if make is not None:
                with name_scope(self.name + "/init/", g):
                    init = make()
                if not isinstance(init, Tensor):
                    raise InvalidArgumentError("Variable %r: its initial value function returned a %s, not a "
                                               "weft.Tensor" % (self.name, type(init).__name__))
            self.initializer = g._add_node("Assign", [self.handle, init], {}, "assign")[0]
            self._value = g._add_node("ReadVariable", [self.handle], {"dtype": self.dtype}, "read")[0]
        _variables(g).append(self)

    def value(self):
        """The read of the variable made with it (a node; ``read()`` makes
        another, for a read after some control dependencies)."""
        return self._value

    def read(self, name=None):
        """A new read of the variable (after the control dependencies open)."""
        return self.graph._add_node("ReadVariable", [self.handle], {"dtype": self.dtype}, name or "")[0]

    def _update(self, op, value, name):
        from .ops import _to_tensor
        v = _to_tensor(value, self.dtype, self.graph, "%s of %s" % (op, self.name))
        return self.graph._add_node(op, [self.handle, v], {}, name or "")[0]

    def assign(self, value, name=None):
        """A node that sets the variable to |value| when it runs."""
        return self._update("Assign", value, name)

    def assign_add(self, value, name=None):
        """A node that adds |value| to the variable when it runs."""
        return self._update("AssignAdd", value, name)

    def assign_sub(self, value, name=None):
        """A node that subtracts |value| from the variable when it runs."""
        return self._update("AssignSub", value, name)

    def __repr__(self):
        return "<weft.Variable '%s' %s%s>" % (self.name, self.dtype, list(self.shape or []))


def _variables(graph):
    if not hasattr(graph, "_weft_variables"):
        graph._weft_variables = []
    return graph._weft_variables


def global_variables_initializer(graph=None):
    """A node that runs every weft.Variable's initializer of the graph."""
    g = graph or get_default_graph()
    inits = [v.initializer for v in _variables(g)]
    with control_dependencies(inits, graph=g):
        return g._add_node("NoOp", [], {}, "init")[0]


# --- Control flow and gradients -------------------------------------------------


def cond(pred, true_fn, false_fn, name=None):
    """``true_fn() if pred else false_fn()`` in the graph: both functions
    build their branch once (true first) and return tensors (one, or a
    list or tuple with the same dtypes); the result has one tensor per
    returned one (a tuple, or the tensor when there is one)."""
    outs = pred.graph._cond(pred, true_fn, false_fn, name or "")
    return outs[0] if len(outs) == 1 else outs


def while_loop(cond, body, loop_vars, maximum_iterations=None, parallel_iterations=10, name=None):
    """``while cond(*vars): vars = body(*vars)`` in the graph; returns the
    final values (a tuple, or the tensor when there is one loop var)."""
    from .ops import _to_tensor
    single = not isinstance(loop_vars, (list, tuple))
    items = [loop_vars] if single else list(loop_vars)
    g = _graph_of(items)
    items = [_to_tensor(v, None, g, "while_loop: loop var") for v in items]
    outs = g._while_loop(cond, body, items, maximum_iterations, parallel_iterations, name or "")
    return outs[0] if single else outs


def gradients(ys, xs, grad_ys=None):
    """The gradients of sum(ys) (each weighted by |grad_ys| when given)
    with respect to each of |xs| (tensors, or weft.Variable: the gradient
    with respect to its value); one tensor per x."""
    single = not isinstance(xs, (list, tuple))
    ys = list(ys) if isinstance(ys, (list, tuple)) else [ys]
    xs = [xs] if single else list(xs)
    xs = [x.handle if isinstance(x, Variable) else x for x in xs]
    grad_ys = [] if grad_ys is None else (list(grad_ys) if isinstance(grad_ys, (list, tuple)) else [grad_ys])
    g = _graph_of(ys)
    grads = g._gradients(ys, xs, grad_ys)
    return grads[0] if single else grads


# --- Files ------------------------------------------------------------------------


def load(path):
    """A graph read from a .wg or .wgt file (``Graph.save`` writes them)."""
    g = Graph()
    g._import(os.fspath(path))
    return g


def import_onnx(path, freeze=True):
    """An ONNX model as a graph; ``graph.onnx_inputs`` and
    ``graph.onnx_outputs`` name its inputs' placeholders and its outputs.
    With ``freeze=False`` the trained weights stay variables."""
    g = Graph()
    io = g._import_onnx(os.fspath(path), freeze)
    g.onnx_inputs = list(io["inputs"])
    g.onnx_outputs = list(io["outputs"])
    return g
