"""Free TCP ports on 127.0.0.1 for the servers the tests start, chosen so that nothing else takes them meanwhile.

A port found with ``bind(("127.0.0.1", 0))`` comes from the kernel's ephemeral range, the same range every
outgoing connection on the machine draws its local port from. Between releasing such a port and the server
binding it, any client (the server's own components dialling each other, another test worker) may be handed
it, and the server dies with "address already in use". So the ports here come from below the ephemeral range,
where the kernel never assigns one on its own, and each pytest-xdist worker draws from its own slice, so two
workers never pick the same one. Each is still checked free by binding it before it is handed out.
"""

from __future__ import annotations

import contextlib
import os
import random
import socket
from collections.abc import Sequence
from pathlib import Path

LOW = 10_000
"""The lowest port handed out (above the registered services most machines run)."""


def _ephemeral_floor() -> int:
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32_768  # the Linux default; other systems use 49152, which is above it
    return max(low, LOW + 1_000)


def _worker_slice() -> Sequence[int]:
    high = _ephemeral_floor()
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    index = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0
    size = max((high - LOW) // max(count, 1), 16)
    start = LOW + (index % max(count, 1)) * size
    return range(start, min(start + size, high))


def free_ports(n: int) -> list[int]:
    """``n`` distinct ports free on 127.0.0.1 now, outside the ephemeral range and this worker's own."""
    candidates = _worker_slice()
    chosen: list[int] = []
    with contextlib.ExitStack() as stack:
        for port in random.sample(candidates, len(candidates)):
            sock = stack.enter_context(socket.socket())
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            chosen.append(port)
            if len(chosen) == n:
                return chosen
    raise OSError(f"no {n} free ports on 127.0.0.1 in {min(candidates)}-{max(candidates)}")


def free_port() -> int:
    """One port free on 127.0.0.1 now (see :func:`free_ports`)."""
    return free_ports(1)[0]
