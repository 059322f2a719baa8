"""Session references (SPEC §4): mention other sessions and attach bounded snapshots.

The names load their module when first asked for: importing one module of the package
(``core.references.projection``, say) does not load the others (the service, the engine)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.lazy import lazy_names

if TYPE_CHECKING:
    from core.references.config import (
        MAX_SESSION_REFERENCES,
        SESSION_REFERENCE_BUDGET_EXCEEDED,
        SESSION_REFERENCE_CANCELLED,
        SESSION_REFERENCE_ERROR_CODES,
        SESSION_REFERENCE_INVALID_CONFIG,
        SESSION_REFERENCE_INVALID_REFERENCE,
        SESSION_REFERENCE_READ_FAILED,
        SESSION_REFERENCE_SELF_REFERENCE,
        SESSION_REFERENCE_TOO_MANY,
        SessionReferenceConfig,
        SessionReferenceError,
    )
    from core.references.mentions import (
        ParsedSessionReferenceText,
        SessionReferenceInput,
        SessionReferenceSpan,
        escape_mention_label,
        find_session_reference_spans,
        format_session_reference_mention,
        parse_session_reference_text,
    )
    from core.references.projection import (
        ProjectedMessage,
        project_surface,
    )
    from core.references.prompt import (
        REFERENCED_SESSIONS_WARNING,
        SESSION_REFERENCE_SOURCE_KIND,
        SESSION_REFERENCE_SOURCE_VERSION,
        is_session_reference_source,
        parse_reference_prompt,
        render_reference_prompt,
        session_reference_source,
    )
    from core.references.retention import (
        RetainedSource,
        RetentionStats,
        omitted_marker,
        retain_source,
        truncate_head_tail,
    )
    from core.references.service import (
        PreparedReferencedMessage,
        SessionDiscovery,
        SessionReferenceCandidate,
        SessionReferenceService,
    )
    from core.references.tagsafe import (
        stringify_tag_safe_json,
        tag_safe_json_size,
    )
    from core.references.uri import (
        SESSION_REFERENCE_SCHEME,
        decode_session_reference_uri,
        encode_session_reference_uri,
    )

__all__ = [
    "MAX_SESSION_REFERENCES",
    "REFERENCED_SESSIONS_WARNING",
    "SESSION_REFERENCE_BUDGET_EXCEEDED",
    "SESSION_REFERENCE_CANCELLED",
    "SESSION_REFERENCE_ERROR_CODES",
    "SESSION_REFERENCE_INVALID_CONFIG",
    "SESSION_REFERENCE_INVALID_REFERENCE",
    "SESSION_REFERENCE_READ_FAILED",
    "SESSION_REFERENCE_SCHEME",
    "SESSION_REFERENCE_SELF_REFERENCE",
    "SESSION_REFERENCE_SOURCE_KIND",
    "SESSION_REFERENCE_SOURCE_VERSION",
    "SESSION_REFERENCE_TOO_MANY",
    "ParsedSessionReferenceText",
    "PreparedReferencedMessage",
    "ProjectedMessage",
    "RetainedSource",
    "RetentionStats",
    "SessionDiscovery",
    "SessionReferenceCandidate",
    "SessionReferenceConfig",
    "SessionReferenceError",
    "SessionReferenceInput",
    "SessionReferenceService",
    "SessionReferenceSpan",
    "decode_session_reference_uri",
    "encode_session_reference_uri",
    "escape_mention_label",
    "find_session_reference_spans",
    "format_session_reference_mention",
    "is_session_reference_source",
    "omitted_marker",
    "parse_reference_prompt",
    "parse_session_reference_text",
    "project_surface",
    "render_reference_prompt",
    "retain_source",
    "session_reference_source",
    "stringify_tag_safe_json",
    "tag_safe_json_size",
    "truncate_head_tail",
]

_HOMES = {
    "MAX_SESSION_REFERENCES": "core.references.config",
    "SESSION_REFERENCE_BUDGET_EXCEEDED": "core.references.config",
    "SESSION_REFERENCE_CANCELLED": "core.references.config",
    "SESSION_REFERENCE_ERROR_CODES": "core.references.config",
    "SESSION_REFERENCE_INVALID_CONFIG": "core.references.config",
    "SESSION_REFERENCE_INVALID_REFERENCE": "core.references.config",
    "SESSION_REFERENCE_READ_FAILED": "core.references.config",
    "SESSION_REFERENCE_SELF_REFERENCE": "core.references.config",
    "SESSION_REFERENCE_TOO_MANY": "core.references.config",
    "SessionReferenceConfig": "core.references.config",
    "SessionReferenceError": "core.references.config",
    "ParsedSessionReferenceText": "core.references.mentions",
    "SessionReferenceInput": "core.references.mentions",
    "SessionReferenceSpan": "core.references.mentions",
    "escape_mention_label": "core.references.mentions",
    "find_session_reference_spans": "core.references.mentions",
    "format_session_reference_mention": "core.references.mentions",
    "parse_session_reference_text": "core.references.mentions",
    "ProjectedMessage": "core.references.projection",
    "project_surface": "core.references.projection",
    "REFERENCED_SESSIONS_WARNING": "core.references.prompt",
    "SESSION_REFERENCE_SOURCE_KIND": "core.references.prompt",
    "SESSION_REFERENCE_SOURCE_VERSION": "core.references.prompt",
    "is_session_reference_source": "core.references.prompt",
    "parse_reference_prompt": "core.references.prompt",
    "render_reference_prompt": "core.references.prompt",
    "session_reference_source": "core.references.prompt",
    "RetainedSource": "core.references.retention",
    "RetentionStats": "core.references.retention",
    "omitted_marker": "core.references.retention",
    "retain_source": "core.references.retention",
    "truncate_head_tail": "core.references.retention",
    "PreparedReferencedMessage": "core.references.service",
    "SessionDiscovery": "core.references.service",
    "SessionReferenceCandidate": "core.references.service",
    "SessionReferenceService": "core.references.service",
    "stringify_tag_safe_json": "core.references.tagsafe",
    "tag_safe_json_size": "core.references.tagsafe",
    "SESSION_REFERENCE_SCHEME": "core.references.uri",
    "decode_session_reference_uri": "core.references.uri",
    "encode_session_reference_uri": "core.references.uri",
}
"""The module each exported name lives in."""


__getattr__ = lazy_names(__name__, _HOMES)
