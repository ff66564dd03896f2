"""Shared pytest set-up: async tests run on anyio's plugin with the asyncio backend."""

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def gateway():  # type: ignore[no-untyped-def]
    """A real gateway with a fresh key and no agent backend."""
    from gateway_harness import run_gateway

    async with run_gateway() as running:
        yield running
