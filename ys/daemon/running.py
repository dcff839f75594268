"""What the dispatcher knows of one delivery while it runs."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from ys.daemon.capture import CappedLog, Pipe
from ys.daemon.launcher import Proc
from ys.store.protocols import Delivery


@dataclass
class Running:
    delivery: Delivery
    task: asyncio.Task[None] | None = None
    proc: Proc | None = None
    acknowledged: bool = False
    lease_expires_at: float = 0.0
    lost: bool = False
    suspended: bool = False  # a shell workflow's `ys step` recorded a suspension
    last_line: str = ""
    log_ended: bool = False  # its log is closed: all the worker printed is in it
    log_path: str = ""
    cancel_noticed: bool = False  # a cancellation was requested while this delivery ran
    grace: asyncio.Task[None] | None = None  # kills the worker if it ignores the cancellation
    cancel_killed: bool = False
    start_error: str = ""
    out: CappedLog | None = None  # the delivery's log, fed by its pipes
    pipes: list[Pipe] = field(default_factory=list)
    started_at: float = 0.0  # time.monotonic() when the dispatcher took it (metrics)
    last_step_at: float = 0.0  # ... and when it last saved a step
    result: str = ""  # the outcome it recorded, for the metrics ("" until then)
    max_attempts: int | None = None  # its workflow's cap on deliveries without an outcome
    ended: str = ""  # why the execution ended without its worker (timed out, cancelled now)
    step_timer: asyncio.Task[None] | None = None  # kills the worker at a step's timeout
    step_key: str = ""  # the step whose attempt has a timeout running
    step_timed_out: bool = False  # ... and the dispatcher killed the worker for it
    step_retry_at: float | None = None  # when the killed step's retry is due (None: failed)
    step_keys: set[str] = field(default_factory=set)  # keys its shell steps used (`ys step`)
    lease_since: float = 0.0  # time.monotonic() no later than its claim (the lease's start)
    lifeline: int | None = None  # a shell script's guard's pipe (ys.guard), the write end
    channel: Any = None  # its worker's channel (ys.daemon.channel.WorkerChannel), if any
    checking_end: bool = False  # a look at whether it ended elsewhere is under way
    check_again: bool = False  # ... and another change came while it looked
