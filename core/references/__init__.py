"""Session references (SPEC §4): mention other sessions and attach bounded snapshots."""

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
from core.references.projection import ProjectedMessage, project_surface
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
from core.references.tagsafe import stringify_tag_safe_json, tag_safe_json_size
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
