"""weft.cluster: watch a cluster from Python (docs/python.md, "Clusters")."""

from . import _weft
from .errors import InvalidArgumentError
from .session import config_from


def status(config, timeout_ms=3000):
    """What every task of the config's cluster says about itself, as
    ``weft cluster status --json`` prints it: one dict per task with
    "task", "address", "answered" (with "error" when it did not),
    "last_heartbeat_ms" and, from a task that answered, "incarnation",
    "role", "state", "step", "total_steps", "global_step", the step times
    ("step_ms_p50", ...), gradient counts and its "peers" as its
    heartbeats see them. ``config`` is a TOML file's path or a dict with
    [cluster.jobs]. Every task is asked at once: ``timeout_ms`` is how long
    to try to reach each, and the call returns within about
    ``timeout_ms + 1000`` ms."""
    if not isinstance(timeout_ms, int) or isinstance(timeout_ms, bool):
        raise InvalidArgumentError("cluster.status: timeout_ms must be an int, not %r" % (timeout_ms,))
    if config is None:
        raise InvalidArgumentError("cluster.status: give the cluster's config (a TOML file's path or a dict)")
    return _weft._cluster_status(config_from(config), timeout_ms)


__all__ = ["status"]
