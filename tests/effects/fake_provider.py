"""A fake payment provider that keeps RFC 004's external-system contract, for the end-to-end
tests. Workflow scripts import it (the tests put this folder on their sys.path).

The ledger is a file of JSON lines, one charge per line, guarded by an flock so that
concurrent or repeated `perform` calls with one effect ID make one charge (guarantee 1),
`lookup` answers NotFound only when no charge exists and none can still land (guarantee 2:
perform holds the lock while it charges), and a charge never changes (guarantee 3).

Every call is also appended to `<ledger>.calls` ("perform <id>" / "lookup <id> <answer>"),
so a test can check the order in which the driver asked.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import ys


class FileProvider:
    def __init__(self, ledger: str | os.PathLike[str]) -> None:
        self.path = Path(ledger)
        self.lock_path = Path(f"{self.path}.lock")
        self.calls_path = Path(f"{self.path}.calls")

    @contextmanager
    def _locked(self) -> Iterator[None]:
        fd = os.open(self.lock_path, os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def _note(self, line: str) -> None:
        with open(self.calls_path, "a") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())

    def _read(self) -> list[dict[str, Any]]:
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return []
        return [json.loads(ln) for ln in text.splitlines() if ln.strip()]

    def charges(self) -> list[dict[str, Any]]:
        with self._locked():
            return self._read()

    def calls(self) -> list[str]:
        try:
            return self.calls_path.read_text().splitlines()
        except FileNotFoundError:
            return []

    def perform(self, effect_id: str, amount: float) -> dict[str, Any]:
        """Charge once per effect ID; a repeat returns the first charge."""
        with self._locked():
            self._note(f"perform {effect_id}")
            charges = self._read()
            for c in charges:
                if c["effect_id"] == effect_id:
                    return c
            charge = {
                "effect_id": effect_id,
                "amount": amount,
                "charge_id": f"ch_{len(charges) + 1}",
            }
            with open(self.path, "a") as f:
                f.write(json.dumps(charge, sort_keys=True) + "\n")
                f.flush()
                os.fsync(f.fileno())
            return charge

    def lookup(self, effect_id: str) -> ys.Settled | ys.NotFound:
        with self._locked():
            for c in self._read():
                if c["effect_id"] == effect_id:
                    self._note(f"lookup {effect_id} settled")
                    return ys.Settled(c)
            self._note(f"lookup {effect_id} not-found")
            return ys.NotFound()
