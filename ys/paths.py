"""Where ys keeps its files (docs/design.md, "Folders"). YS_HOME puts everything in one folder."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import NamedTuple
from urllib.parse import quote

NAME_MAX = 255  # bytes in one file name, on every common file system
LONG_PREFIX = 160  # of a name too long to keep whole: the encoded ID's first bytes kept
# Workflows run with cron's umask, whatever the daemon's own (0077: its files are private), so
# what a script writes is readable as it would be from cron (docs/design.md, "Workflow options").
WORKFLOW_UMASK = 0o022


class Paths(NamedTuple):
    """The folders and files in force. (A NamedTuple, not a dataclass: `ys get` imports this,
    and importing dataclasses costs it ~12 ms of its start-up, for inspect.)"""

    data: Path  # database and logs
    config: Path  # workflows
    runtime: Path  # the socket's private folder
    db: Path
    workflows: Path
    socket: Path

    @property
    def logs(self) -> Path:
        return self.data / "logs"

    @property
    def lock(self) -> Path:
        """One daemon per database: the lock sits beside the database file, so two daemons
        that reach one database through two sockets or runtime folders still meet here (the
        real path, so a symlink to the file meets it too). It holds the owner's pid."""
        return Path(f"{self.db.resolve()}.lock")

    @property
    def socket_lock(self) -> Path:
        """One daemon per socket: whoever holds it may replace a stale socket file."""
        return self.runtime / "ys.lock"

    @property
    def daemon_log(self) -> Path:
        return self.data / "daemon.log"

    def log_dir(self, execution_id: str) -> Path:
        """An execution's log folder: logs/<log_name(ID)>."""
        return self.logs / log_name(execution_id)


def log_name(execution_id: str) -> str:
    """The encoded ID, so it can never leave logs/ (`.` and `..` are encoded too: quote()
    leaves dots alone). An encoding over NAME_MAX bytes (a 256-byte ID, or one of slashes or
    CJK text, which encode to 3 or 9 bytes a character) keeps the encoding of the ID's first
    characters, at most LONG_PREFIX bytes, then `%~` and 32 hex digits of the ID's SHA-256:
    quote() never writes `%~`, so such a name is no other ID's whole encoding, and the prefix
    still says whose folder it is. Names that fit are the encoding itself, as they always were."""
    name = quote(execution_id, safe="")
    if name in (".", ".."):
        return name.replace(".", "%2E")
    if len(name) <= NAME_MAX:  # quote() writes ASCII only: characters are bytes
        return name
    prefix, size = [], 0
    for char in execution_id:
        part = quote(char, safe="")
        if size + len(part) > LONG_PREFIX:
            break
        prefix.append(part)
        size += len(part)
    import hashlib  # only for the rare long ID: a CLI start-up does not pay its import

    digest = hashlib.sha256(execution_id.encode("utf-8")).hexdigest()[:32]
    return "".join(prefix) + "%~" + digest


def resolve(workflows: str | os.PathLike[str] | None = None) -> Paths:
    """The paths in force: YS_HOME, then platformdirs; YS_DB, YS_WORKFLOWS, YS_SOCKET override."""
    home = os.environ.get("YS_HOME")
    if home:
        root = Path(home).expanduser().absolute()
        data, config, runtime = root, root, root / "run"
    else:
        import platformdirs

        data = Path(platformdirs.user_data_dir("ys"))
        config = Path(platformdirs.user_config_dir("ys"))
        with warnings.catch_warnings():
            # Without XDG_RUNTIME_DIR (cron, su, some ssh sessions) platformdirs falls back
            # to /tmp/runtime-<uid> and warns on every call; ys checks that folder itself
            # (0700, its owner) before it puts a socket there, so the warning says nothing.
            warnings.simplefilter("ignore")
            runtime = Path(platformdirs.user_runtime_dir("ys"))
    sock = os.environ.get("YS_SOCKET")
    socket_path = Path(sock).expanduser().absolute() if sock else runtime / "ys.sock"
    wf = workflows or os.environ.get("YS_WORKFLOWS")
    return Paths(
        data=data,
        config=config,
        runtime=socket_path.parent,
        db=Path(os.environ.get("YS_DB") or data / "ys.db").expanduser().absolute(),
        workflows=Path(wf).expanduser().absolute() if wf else config / "workflows",
        socket=socket_path,
    )
