"""What the daemon's parts see of the daemon (`ys.daemon.main.Daemon`): the routes and the
scheduler are typed against this, not against the class, so each can be built and tested on
its own and no module imports main."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ys.daemon.dispatcher import Dispatcher
    from ys.daemon.hub import Hub
    from ys.daemon.metrics import Metrics
    from ys.daemon.registry import Registry, Workflow
    from ys.daemon.scheduler import Scheduler
    from ys.paths import Paths
    from ys.settings import Settings
    from ys.store.protocols import Store
    from ys.tracing import TracingJson


class DaemonParts(Protocol):
    """The running daemon's store, registry, dispatcher, scheduler and hub."""

    @property
    def store(self) -> Store: ...

    @property
    def registry(self) -> Registry: ...

    @property
    def dispatcher(self) -> Dispatcher: ...

    @property
    def scheduler(self) -> Scheduler: ...

    @property
    def hub(self) -> Hub: ...

    @property
    def paths(self) -> Paths: ...

    @property
    def started_at(self) -> float: ...

    @property
    def daemon_id(self) -> str: ...

    @property
    def settings(self) -> Settings: ...

    def tracing_status(self) -> TracingJson: ...

    @property
    def metrics(self) -> Metrics: ...

    def handler_for(self, workflow: str) -> str | None:
        """The workflow a failure of `workflow` admits, if any."""

    def handler_warning(self, wf: Workflow) -> str | None:
        """Why `wf`'s failure handler cannot run (it names no workflow), or None."""

    def request_stop(self) -> None: ...
