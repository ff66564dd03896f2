"""Shared pytest set-up: async tests run on anyio's plugin with the asyncio backend."""

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
