"""Wiring: build the store, query, service and provider once, and hand them down."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from core.config import ConfigError, DshConfig
from core.engine import SYSTEM_PROMPT, ChatSession
from core.log import SESSION_PROFILE, Event, SessionHeader
from core.profiles import Profile, ProfileError
from core.providers.base import ModelProvider
from core.providers.offline import OfflineProvider
from core.references import SessionReferenceConfig, SessionReferenceService
from core.store import SessionStore
from stores import SessionQuery, open_store
from tui.shared.profilechoice import (
    RECORDED_NAME_CHARS,
    SessionProfile,
    profile_event_name,
    resolve_profile,
)

__all__ = [
    "OFFLINE_DELAY_ENV",
    "RECORDED_NAME_CHARS",
    "Runtime",
    "SessionProfile",
    "build_runtime",
    "make_profile_provider",
    "make_provider",
    "offline_delay_from_env",
    "open_runtime",
    "profile_event_name",
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
    """The default profile's provider. A missing key is reported when the model is first
    asked; a key holding control characters is a ``ConfigError`` now (naming the variable
    only)."""
    return make_profile_provider(config, config.profile(), offline_delay=offline_delay)


def make_profile_provider(
    config: DshConfig, profile: Profile, *, offline_delay: float = 0.0
) -> ModelProvider:
    """The provider of ``profile`` (timeouts and reply bounds from ``config``)."""
    if profile.provider == "openai":
        from core.providers.openai import OpenAICompatibleProvider
        from core.secrets import api_key_from_env

        key_env = profile.api_key_env or "DEEPSEEK_API_KEY"
        return OpenAICompatibleProvider(
            base_url=profile.base_url,
            model=profile.model,
            api_key=api_key_from_env(os.environ, key_env),
            api_key_env=key_env,
            reply_timeout=config.reply_timeout,
            max_reply_bytes=config.max_reply_bytes,
            temperature=profile.temperature,
            max_output_tokens=profile.max_output_tokens,
        )
    return OfflineProvider(profile.model, chunk_delay=offline_delay)


@dataclass
class Runtime:
    """Everything a host needs, built once per process.

    ``provider`` is the default profile's; a session on another profile gets that
    profile's provider (built once, closed with the runtime). A provider injected by a
    test (``fixed_provider``) answers for every profile."""

    config: DshConfig
    store: SessionStore
    query: SessionQuery
    service: SessionReferenceService
    provider: ModelProvider
    fixed_provider: bool = False
    offline_delay: float = 0.0
    _providers: dict[str, ModelProvider] = field(default_factory=dict)

    def provider_for(self, profile: Profile) -> ModelProvider:
        """The provider that answers for ``profile``."""
        if self.fixed_provider or profile.name == self.config.default_profile:
            return self.provider
        found = self._providers.get(profile.name)
        if found is None:
            found = make_profile_provider(self.config, profile, offline_delay=self.offline_delay)
            self._providers[profile.name] = found
        return found

    async def aclose_providers(self) -> None:
        providers, self._providers = list(self._providers.values()), {}
        for provider in providers:
            await provider.aclose()

    async def session_profile(self, session_id: str) -> SessionProfile:
        """The profile ``session_id`` uses: the latest ``session/profile`` in its log, else
        the default (also when the recorded one is no longer configured: ``note``)."""
        latest = await read_latest_events(self.store, SESSION_PROFILE, [session_id])
        return self.resolve_profile(profile_event_name(latest.get(session_id)))

    def resolve_profile(self, recorded: str | None) -> SessionProfile:
        return resolve_profile(self.config, recorded)

    def chat_for(self, header: SessionHeader, profile: Profile) -> ChatSession:
        """A ``ChatSession`` on ``header`` answered by ``profile``."""
        return ChatSession(
            self.store,
            self.query,
            self.service,
            self.provider_for(profile),
            header,
            profile=profile,
            system_prompt=SYSTEM_PROMPT if profile.system_prompt is None else profile.system_prompt,
            check_key=not self.fixed_provider,
        )

    async def chat(self, session_id: str) -> ChatSession:
        header = await self.store.read_header(session_id)
        chosen = await self.session_profile(session_id)
        return self.chat_for(header, chosen.profile)

    async def switch_profile(self, chat: ChatSession, name: str) -> ChatSession:
        """Record ``name`` as ``chat``'s session profile (a ``session/profile`` event) and
        return a ``ChatSession`` that answers with it from the next turn on. An unknown
        name is a ``ProfileError``, a profile whose prompt file cannot be read a
        ``ConfigError``; either records nothing."""
        profile = self.config.profile(name)
        if profile.system_prompt_file is not None:  # said now, not at the next turn
            try:
                profile.system_text(SYSTEM_PROMPT)
            except ProfileError as err:
                raise ConfigError(str(err)) from None
        switched = self.chat_for(chat.header, profile)
        await self.store.append(chat.session_id, SESSION_PROFILE, profile_event_data(profile))
        return switched


def profile_event_data(profile: Profile) -> dict[str, str]:
    """What a ``session/profile`` event records: the name, and the provider and model it
    stood for then (replay and export show what answered)."""
    return {"profile": profile.name, "provider": profile.provider, "model": profile.model}


async def read_latest_events(
    store: SessionStore, type: str, session_ids: Sequence[str] | None = None
) -> dict[str, Event]:
    """``store.read_latest_events``: the latest event of ``type`` (a session's profile,
    fork origin or source) of each given session."""
    return await store.read_latest_events(type, session_ids)


def build_runtime(
    config: DshConfig,
    store: SessionStore,
    provider: ModelProvider,
    *,
    fixed_provider: bool = False,
    offline_delay: float = 0.0,
) -> Runtime:
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
    return Runtime(
        config,
        store,
        query,
        service,
        provider,
        fixed_provider=fixed_provider,
        offline_delay=offline_delay,
    )


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
        runtime = build_runtime(
            config,
            store,
            provider,
            fixed_provider=not own_provider,
            offline_delay=offline_delay,
        )
        try:
            yield runtime
        finally:
            await runtime.aclose_providers()
            if own_provider:
                await provider.aclose()
    finally:
        if own_store:
            await store.close()
