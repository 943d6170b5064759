"""Fixtures of the core tests (core only; project-wide fixtures belong in tests/conftest.py)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

# The suite runs with --import-mode=importlib, which puts no test directory on sys.path; the core
# tests share plain helper functions and constants (core_helpers.py), so make that one importable.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from blockviz.core import BlockHasher, Request


@pytest.fixture
def hasher() -> BlockHasher:
    """sha256, no seed configured: NONE_HASH = sha256("vllm-none-hash"), as in vLLM 0.33."""
    return BlockHasher("sha256")


@pytest.fixture
def make_req(hasher):
    """make_req(rid, tokens, block_size=4, **kw): a Request hashed by the sha256 hasher."""
    def make(rid, tokens, block_size=4, **kw):
        return Request(rid, list(tokens), hasher=hasher, block_size=block_size, **kw)
    return make
