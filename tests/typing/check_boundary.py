"""Checked by mypy (``make typecheck``): decorated functions keep their exact types."""

from __future__ import annotations

from collections.abc import AsyncIterator, Coroutine, Iterator
from typing import Any

from typing_extensions import assert_type

import chronicle_otel as chronicle


@chronicle.boundary
def bare(x: int, *, y: str = "a") -> str:
    return y * x


@chronicle.boundary(kind="llm", name="plan")
def called(request: str, temperature: float = 0.7) -> dict[str, int]:
    return {}


@chronicle.boundary(kind="tool")
async def tool(symbol: str) -> float:
    return 1.0


@chronicle.boundary(kind="llm")
def stream(n: int) -> Iterator[str]:
    yield from ("a",) * n


@chronicle.boundary(kind="llm")
async def astream(n: int) -> AsyncIterator[str]:
    for _ in range(n):
        yield "a"


class Agent:
    @chronicle.boundary(kind="agent")
    def run(self, prompt: str) -> bool:
        return True


assert_type(bare(1, y="b"), str)
assert_type(called("x"), dict[str, int])
coro = tool("MSFT")
_ = assert_type(coro, Coroutine[Any, Any, float])
coro.close()
assert_type(stream(2), Iterator[str])
assert_type(astream(2), AsyncIterator[str])
assert_type(Agent().run("p"), bool)

with chronicle.call("x", kind="tool", input={"a": 1}) as c:
    assert_type(c.set_output(3), int)

chronicle.session(user_id="u")
chronicle.configure(service_name="s", store=False)


class Client:
    @classmethod
    def create(cls, model: str) -> str:
        return model


@chronicle.boundary(kind=chronicle.BoundaryKind.TOOL)
def with_enum_kind(x: int) -> int:
    return x


assert_type(with_enum_kind(1), int)
assert_type(Client.create("m"), str)
assert_type(chronicle.instrument(Client, "create", kind="llm"), None)
assert_type(chronicle.uninstrument(Client, "create"), bool)


async def blocks() -> None:
    async with chronicle.call("y", kind=chronicle.BoundaryKind.MEMORY) as block:
        assert_type(block.set_output("v"), str)
