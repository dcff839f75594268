"""The socket and the daemon's lifetime: private to its user (modes and the peer-uid check),
a stale socket replaced on restart, one daemon per home."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from e2e_support import make_home

import ys

pytestmark = pytest.mark.e2e

# What a process of another user runs: the standard library only, so it needs no access to the
# project or its virtual environment.
PEER = r"""
import json, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(10)
try:
    s.connect(sys.argv[1])
except OSError as exc:
    print(json.dumps({"connect": type(exc).__name__, "errno": exc.errno}))
    sys.exit(0)
s.sendall(b"GET /v1/version HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
data = b""
while True:
    chunk = s.recv(65536)
    if not chunk:
        break
    data += chunk
head, _, body = data.partition(b"\r\n\r\n")
print(json.dumps({"status": int(head.split()[1]), "body": json.loads(body)}))
"""


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_socket_is_mode_0600_in_a_0700_folder(daemon):
    st = daemon.socket.lstat()
    assert stat.S_ISSOCK(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o600
    assert st.st_uid == os.getuid()
    assert _mode(daemon.socket.parent) == 0o700


def _python_for_nobody() -> str | None:
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3"):
        if not os.path.exists(candidate):
            continue
        probe = subprocess.run(
            [
                "setpriv",
                "--reuid=nobody",
                "--regid=nogroup",
                "--clear-groups",
                candidate,
                "-I",
                "-c",
                "print(1)",
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
        if probe.returncode == 0:
            return candidate
    return None


@pytest.fixture
def public_home():
    """A daemon whose home another user can reach (tmp_path sits in a 0700 folder)."""
    if os.getuid() != 0:
        pytest.skip("needs root to run a client as another user (nobody)")
    if shutil.which("setpriv") is None:
        pytest.skip("needs setpriv to run a client as another user")
    base = Path(tempfile.mkdtemp(prefix="ys-e2e-uid-"))
    os.chmod(base, 0o711)
    h = make_home(base)
    try:
        yield h.start()
    finally:
        h.stop()
        shutil.rmtree(base, ignore_errors=True)


def test_socket_connection_from_another_uid_is_refused(public_home):
    daemon = public_home
    python = _python_for_nobody()
    if python is None:
        pytest.skip("no Python interpreter that the user nobody may run")

    def as_nobody() -> dict:
        out = subprocess.run(
            [
                "setpriv",
                "--reuid=nobody",
                "--regid=nogroup",
                "--clear-groups",
                python,
                "-I",
                "-c",
                PEER,
                str(daemon.socket),
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    sock, run = daemon.socket, daemon.socket.parent
    home = run.parent
    try:
        os.chmod(home, 0o711)  # let nobody reach run/, so that run/ itself is what refuses
        assert (_mode(run), _mode(sock)) == (0o700, 0o600)
        assert as_nobody() == {"connect": "PermissionError", "errno": 13}
        os.chmod(run, 0o711)  # the folder opened: the socket's own mode refuses
        assert as_nobody() == {"connect": "PermissionError", "errno": 13}

        os.chmod(sock, 0o666)  # both opened: the daemon's peer-uid check is all that is left
        answer = as_nobody()
        assert answer["status"] == 403
        assert answer["body"]["code"] == "PERMISSION_DENIED"
        assert "refused a connection from uid 65534" in daemon.log()
    finally:
        os.chmod(sock, 0o600)
        os.chmod(run, 0o700)
        os.chmod(home, 0o700)
    assert daemon.client().version()["pid"] == daemon.proc.pid  # its own user is served


def test_stale_socket_left_by_kill9_is_replaced_on_restart(daemon):
    first = daemon.proc.pid
    daemon.kill9()
    assert stat.S_ISSOCK(daemon.socket.lstat().st_mode)  # left behind
    with pytest.raises(ys.DaemonUnavailable):
        daemon.client(timeout=5).version()

    daemon.start()
    assert daemon.client().version()["pid"] == daemon.proc.pid != first
    assert _mode(daemon.socket) == 0o600


def test_second_daemon_for_the_same_home_refuses_to_start(daemon):
    second = subprocess.run(
        [sys.executable, "-m", "ys.daemon", "run"],
        env=daemon.env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert second.returncode == 1
    assert "already running" in second.stderr
    # the first one is untouched and still answers on its socket
    assert daemon.proc.poll() is None
    assert daemon.client().version()["pid"] == daemon.proc.pid
    assert _mode(daemon.socket) == 0o600
