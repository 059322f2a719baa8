"""A ``ModelProvider`` for any OpenAI-compatible chat-completions endpoint (DeepSeek by default).

Streams over server-sent events. Failures become ``ProviderError`` with a ``kind`` a UI can
explain; rate limits, 5xx answers and unreachable hosts are retried with backoff, but only
until the first event has been yielded, so a caller never sees a reply twice.

A hostile or broken server cannot hang or flood a reply: ``reply_timeout`` bounds the whole
reply, ``max_reply_bytes`` bounds its text and every single event or body, and decoding is
linear. The key is a ``Secret`` sent by an ``httpx.Auth`` that writes the header on the
request itself, so no frame holds it in a local; every message passes through ``redact``.

One concern per module: ``provider`` (``OpenAICompatibleProvider``), ``settings`` (its
defaults), ``wire`` (the URL, the text sent, the deltas read), ``sse`` (server-sent events),
``deadlines`` (waits under cancel and deadline) and ``errors`` (a failure in words). Every
name is importable from here, as before.
"""

from core.providers.openai.provider import OpenAICompatibleProvider
from core.providers.openai.settings import (
    DEFAULT_API_KEY_ENV,
    DEFAULT_BASE_URL,
    DEFAULT_MAX_REPLY_BYTES,
    DEFAULT_MODEL,
    DEFAULT_REPLY_TIMEOUT,
)
from core.providers.openai.sse import _SSEDecoder as _SSEDecoder
from core.providers.openai.wire import chat_completions_url, wire_text

__all__ = [
    "DEFAULT_API_KEY_ENV",
    "DEFAULT_BASE_URL",
    "DEFAULT_MAX_REPLY_BYTES",
    "DEFAULT_MODEL",
    "DEFAULT_REPLY_TIMEOUT",
    "OpenAICompatibleProvider",
    "chat_completions_url",
    "wire_text",
]
