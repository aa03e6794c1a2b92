"""Who holds a lease of the catalog's (retention's, the health watch's): a name for this process,
and whether the process a name stands for is gone.

A holder is named ``host:pid:token``. A lease also keeps the holder's process space (its host, the
machine's boot and its PID namespace): a holder of this same space whose pid is no longer alive
was stopped or killed before it gave its lease back, and its lease may be taken over at once
rather than once it lapses. A holder of another host, another boot or another PID namespace (a
container), or of a lease that keeps no space, is never judged so: its lease lapses.
"""

from __future__ import annotations

import os
import secrets
import socket
from pathlib import Path


def holder_id() -> str:
    """A name for a lease's holder: this host, this process and a token of its own
    (``host:pid:token``)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


def process_space() -> str:
    """Where this process's pid means this process: the host, the machine's boot and the PID
    namespace, as far as the system tells (``host`` alone where it tells neither)."""
    parts = [socket.gethostname()]
    for source in (Path("/proc/sys/kernel/random/boot_id"), Path("/proc/self/ns/pid")):
        try:
            parts.append(os.readlink(source) if source.is_symlink() else source.read_text().strip())
        except OSError:
            parts.append("")
    return "/".join(parts)


def gone(holder: str, space: object) -> bool:
    """Whether ``holder`` (:func:`holder_id`) is a process of this process space (``space``, as
    :func:`process_space` gave it to the holder) that is no longer alive."""
    host, _, rest = holder.partition(":")
    pid = rest.partition(":")[0]
    if not pid.isdigit() or host != socket.gethostname() or space != process_space():
        return False
    if int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:  # another user's process: alive
        return False
    return False


__all__ = ["gone", "holder_id", "process_space"]
