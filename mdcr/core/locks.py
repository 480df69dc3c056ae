"""Locks: one process at a time works on an output folder (or on a shared index).

A lock is an exclusive ``flock`` on a small file next to the folder it guards. The kernel
releases it when its process ends, however it ends, so a lock left by a killed process is
free at once; the next process takes it over and says whose it was. The file holds who
holds the lock (PID, host, start time, command), so a second process can say whom it waits
for, or, with ``wait=False``, name the holder in a one-line error.

The holder deletes the file when it is done. A waiter that then gets the lock on the
deleted file notices (the path no longer names the file it locked) and tries again, so two
processes never both believe they hold a lock.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from mdcr.core.errors import MdcrError


class LockBusyError(MdcrError):
    """Another process holds the lock and the caller asked not to wait."""


@dataclass(frozen=True)
class Holder:
    """Who holds (or held) a lock."""

    pid: int
    host: str
    since: str
    command: str

    def describe(self) -> str:
        return f"PID {self.pid} on {self.host} (since {self.since}: {self.command})"

    @classmethod
    def me(cls) -> Holder:
        return cls(
            pid=os.getpid(),
            host=socket.gethostname(),
            since=time.strftime("%Y-%m-%d %H:%M:%S"),
            command=" ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(sys.argv))[
                :200
            ],
        )


def _read_holder(fd: int) -> Holder | None:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        data = json.loads(os.read(fd, 4096).decode() or "null")
        return Holder(**data) if isinstance(data, dict) else None
    except (OSError, ValueError, TypeError):
        return None


def _holder_at(path: Path) -> Holder | None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        return _read_holder(fd)
    finally:
        os.close(fd)


def _write_holder(fd: int, holder: Holder) -> None:
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, json.dumps(holder.__dict__).encode())


def _flock(fd: int, path: Path, blocking: bool) -> bool:
    """Take the lock; False if it is busy and ``blocking`` is off."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        return True
    except BlockingIOError:
        return False
    except OSError as exc:
        if exc.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
            raise MdcrError(
                f"cannot lock '{path}' ({exc.strerror}): its filesystem does not support "
                "file locks; put the store ($MDCR_HOME) on a local or NFSv4 filesystem"
            ) from None
        raise


@contextlib.contextmanager
def exclusive(
    path: Path, *, what: str, wait: bool = True, label: str = "", quiet: bool = False
) -> Iterator[Holder | None]:
    """Hold an exclusive lock on the lock file ``path`` for the ``with`` block.

    ``what`` names the guarded thing in messages. A busy lock is waited for (printing the
    holder once), or with ``wait=False`` raises :class:`LockBusyError`. Yields the earlier
    holder when the lock was left behind by a process that is gone, else None.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    prefix = f"[{label}] " if label else ""
    announced = False
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if not _flock(fd, path, blocking=False):
                holder = _holder_at(path)
                who = holder.describe() if holder else "another process"
                if not wait:
                    raise LockBusyError(
                        f"{what} is being built by {who}; wait for it, or run without --no-wait"
                    )
                if not quiet and not announced:
                    print(
                        f"{prefix}waiting for {who} to finish {what}", file=sys.stderr, flush=True
                    )
                    announced = True
                _flock(fd, path, blocking=True)
            # The holder may have deleted the file while we waited: lock the current one.
            try:
                same = os.stat(path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
        except BaseException:
            os.close(fd)
            raise
        if same:
            break
        os.close(fd)
    try:
        left = _read_holder(fd)  # a released lock has no file; one still here was abandoned
        if left is not None and not quiet:
            print(
                f"{prefix}taking over {what} from {left.describe()}, which is gone",
                file=sys.stderr,
                flush=True,
            )
        _write_holder(fd, Holder.me())
        yield left
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        os.close(fd)


def busy_holder(path: Path) -> Holder | None:
    """Who holds the lock ``path`` now, or None when no process does (no file, or one a
    process that is gone left behind). Only looks: never takes or removes the lock."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_holder(fd) or Holder(0, "?", "?", "another process")
        except OSError:
            return None
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
