"""Sessions: weft.Session runs a graph built in Python, weft.InferenceSession
a model file with ONNX Runtime's API (docs/python.md, "Sessions")."""

import os

from . import _weft
from .errors import InvalidArgumentError
from .graph import get_default_graph


def _toml_value(value, where):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v, where) for v in value) + "]"
    raise InvalidArgumentError("config: %s is a %s; a config holds str, int, float, bool, lists and tables"
                               % (where, type(value).__name__))


def _toml(table, prefix=""):
    lines, tables = [], []
    for key, value in table.items():
        if isinstance(value, dict):
            tables.append((key, value))
        else:
            lines.append("%s = %s" % (key, _toml_value(value, (prefix + "." if prefix else "") + key)))
    for key, value in tables:
        name = prefix + "." + key if prefix else key
        lines.append("[%s]" % name)
        lines.append(_toml(value, name))
    return "\n".join(lines)


def config_from(config):
    """A config from None (the built-in default), a path to a TOML file, or
    a dict of its sections ({"runtime": {"inter_op_threads": 2}})."""
    if config is None:
        return _weft._default_config()
    if isinstance(config, _weft._Config):
        return config
    if isinstance(config, dict):
        return _weft._parse_config(_toml(config), "<config dict>", os.getcwd())
    if isinstance(config, (str, os.PathLike)):
        return _weft._load_config(os.fspath(config))
    raise InvalidArgumentError("config: give None, a path to a TOML file or a dict, not a %s"
                               % type(config).__name__)


class Session(_weft._Session):
    """Runs a graph: ``Session(graph=None, config=None)``; the graph as it is
    now (make the session once the graph is built), the default graph
    without one. ``config`` is None, a TOML file's path or a dict
    (docs/config.md). Use it with ``with``, or call close()."""

    def __init__(self, graph=None, config=None):
        graph = graph if graph is not None else get_default_graph()
        if not isinstance(graph, _weft.Graph):
            raise InvalidArgumentError("Session: graph is a %s, not a weft.Graph" % type(graph).__name__)
        _weft._Session.__init__(self, graph, config_from(config))
        self.graph = graph

    def save(self, prefix):
        """Writes every variable of the graph as the checkpoint ``prefix``
        (``prefix.index`` and its data files; the directory is made),
        each under its name, as ``weft train`` writes them; returns the
        prefix. ``weft ckpt inspect`` reads it."""
        return self._save(os.fspath(prefix))

    def restore(self, path):
        """Sets every variable of the graph from a checkpoint: ``path`` is
        its prefix, or a checkpoint directory (``[checkpoint] dir`` of a
        training run), whose newest checkpoint is read. Every variable
        must be in it with its dtype and shape; nothing changes
        otherwise. Returns the prefix read. Restoring takes the place of
        running the initializer."""
        return self._restore(os.fspath(path))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class NodeArg:
    """An input or output of an InferenceSession's model, as ONNX Runtime
    describes it: ``name``, ``type`` ("tensor(float)"), ``shape`` (None for
    an unknown dimension) and Weft's ``dtype`` ("f32")."""

    def __init__(self, d):
        self.name, self.type, self.shape, self.dtype = d["name"], d["type"], d["shape"], d["dtype"]

    def __repr__(self):
        return "NodeArg(name=%r, type=%r, shape=%r)" % (self.name, self.type, self.shape)


class InferenceSession:
    """A model file (.onnx, .wg, .wgt) ready to run, with ONNX Runtime's
    API: ``sess.run(None, {"input": array})`` returns every output;
    ``get_inputs()`` and ``get_outputs()`` describe them. ``providers`` is
    accepted for code written for ONNX Runtime and ignored: devices come
    from the config."""

    def __init__(self, path, config=None, providers=None, sess_options=None):
        del providers, sess_options
        self._path = os.fspath(path)
        self._session = _weft._InferenceSession(self._path, config_from(config))

    def run(self, output_names, input_feed, run_options=None):
        """The outputs |output_names| (None: every output, in the model's
        order) as a list of arrays, from ``input_feed``, a dict of the
        model's inputs by name. ``run_options`` is ignored."""
        del run_options
        if output_names is not None:
            output_names = list(output_names)
        return self._session._run(output_names, dict(input_feed))

    def get_inputs(self):
        """The model's inputs, as NodeArg (name, type, shape, dtype)."""
        return [NodeArg(d) for d in self._session._inputs()]

    def get_outputs(self):
        """The model's outputs, as NodeArg (name, type, shape, dtype)."""
        return [NodeArg(d) for d in self._session._outputs()]
