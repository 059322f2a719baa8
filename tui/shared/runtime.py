"""Wiring: build the store, query, service and provider once, and hand them down."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass

from core.config import ConfigError, DshConfig
from core.engine import ChatSession
from core.providers.base import ModelProvider
from core.providers.offline import OfflineProvider
from core.references import SessionReferenceConfig, SessionReferenceService
from core.store import SessionStore
from stores import SessionQuery, open_store

__all__ = [
    "OFFLINE_DELAY_ENV",
    "Runtime",
    "build_runtime",
    "make_provider",
    "offline_delay_from_env",
    "open_runtime",
]

OFFLINE_DELAY_ENV = "DSH_OFFLINE_DELAY"


def offline_delay_from_env(env: Mapping[str, str], default: float = 0.0) -> float:
    """Seconds the offline provider waits before each chunk (``DSH_OFFLINE_DELAY``; tests use
    it to make a reply slow enough to interrupt). ``default`` when unset."""
    raw = env.get(OFFLINE_DELAY_ENV, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 60.0:
        raise ConfigError(f"environment: {OFFLINE_DELAY_ENV} must be a number of seconds (0–60)")
    return value


def make_provider(config: DshConfig, *, offline_delay: float = 0.0) -> ModelProvider:
    """The configured provider. A missing key is reported when the model is first asked; a
    key holding control characters is a ``ConfigError`` now (naming the variable only)."""
    if config.provider == "openai":
        from core.providers.openai import OpenAICompatibleProvider
        from core.secrets import api_key_from_env

        return OpenAICompatibleProvider(
            base_url=config.base_url,
            model=config.effective_model,
            api_key=api_key_from_env(os.environ, config.api_key_env),
            api_key_env=config.api_key_env,
            reply_timeout=config.reply_timeout,
            max_reply_bytes=config.max_reply_bytes,
        )
    return OfflineProvider(config.effective_model, chunk_delay=offline_delay)


@dataclass
class Runtime:
    """Everything a host needs, built once per process."""

    config: DshConfig
    store: SessionStore
    query: SessionQuery
    service: SessionReferenceService
    provider: ModelProvider

    async def chat(self, session_id: str) -> ChatSession:
        header = await self.store.read_header(session_id)
        return ChatSession(self.store, self.query, self.service, self.provider, header)


def build_runtime(config: DshConfig, store: SessionStore, provider: ModelProvider) -> Runtime:
    """The query and the session-reference service (with the config's limits) over
    ``store``: the wiring every host shares; opening and closing are the caller's."""
    query = SessionQuery(store)
    limits = config.references
    service = SessionReferenceService(
        query,
        SessionReferenceConfig(
            max_references=limits.max_references,
            candidate_limit=limits.candidate_limit,
            max_reference_bytes=limits.max_reference_bytes,
        ),
    )
    return Runtime(config, store, query, service, provider)


@asynccontextmanager
async def open_runtime(
    config: DshConfig,
    *,
    store: SessionStore | None = None,
    provider: ModelProvider | None = None,
    offline_delay: float = 0.0,
    progress: Callable[[int, int], None] | None = None,
) -> AsyncIterator[Runtime]:
    """The runtime on the configured store (or ``store``); ``progress`` follows a long
    upgrade of the store when it is opened (see ``stores.open_store``)."""
    own_store = store is None
    if store is None:
        store = await open_store(config.database, progress=progress, postgres=config.postgres)
    try:
        own_provider = provider is None
        if provider is None:
            provider = make_provider(config, offline_delay=offline_delay)
        try:
            yield build_runtime(config, store, provider)
        finally:
            if own_provider:
                await provider.aclose()
    finally:
        if own_store:
            await store.close()
