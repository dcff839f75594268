"""The worker's wire formats, written by the daemon (ys/daemon/launcher.py,
ys/daemon/workerstart.py) and read here, in the worker and the fork server: the launch, the
first line of a delivery's channel, and the fork server's lines to the daemon (docs/design.md,
"Wire formats"). Typing only: a worker pays nothing to import it."""

from __future__ import annotations

from typing import NotRequired, TypedDict

# One saved step in a launch (a JSON array): key, kind, status, value (canonical JSON),
# attempts, wake_at; the rest of it is StepWrite's fields in their order.
LaunchStep = tuple[str, str, str, str | None, int, float | None]


class Limits(TypedDict):
    """A worker's nice value and memory limit (`runenv.apply_limits`' arguments), also sent
    with a warm worker's launch."""

    nice: int | None
    memory_max: int | None  # bytes
    cgroup: str | None  # its cgroup v2 scope (ys.daemon.cgroups)


class Launch(TypedDict):
    """A Python worker's launch: the first line of its channel (JSON), written by
    ys.daemon.workerstart and read by ys.worker.delivery."""

    execution_id: str
    attempt: int
    workflow: str
    script: str
    sha256: NotRequired[str]  # the version the claim recorded, when a copy of it is kept
    copy: NotRequired[str]  # that kept copy
    lease_seconds: float
    lease_since: float  # time.monotonic(), the box's: ys.guard
    clock_offset: float  # the store's clock less this box's
    params: str  # canonical JSON
    context: str  # canonical JSON
    cancel_requested: bool
    steps: list[LaunchStep]


class WarmLaunch(Launch, Limits):
    """A launch sent to a fork server's spare, which runs with the server's environment: the
    delivery's own environment, folder, umask and limits go with it."""

    env: dict[str, str]
    cwd: str
    umask: int


class ServerMessage(TypedDict, total=False):
    """A line from the fork server (ys.worker.forkserver): one of these members."""

    exit: int  # a worker's pid, ended with `code`
    code: int
    spare: int | None  # a spare's pid (its socket follows), None: it could not fork
    error: str  # why it could not fork
    ready: int  # the server's pid, once it is up
