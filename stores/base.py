"""The ``SessionStore`` protocol (SPEC §3) every store implements.

It is defined in ``core.store`` (the engine depends on it and ``core`` may not import
``stores``) and re-exported here, where the SPEC names it.
"""

from core.store import SessionStore

__all__ = ["SessionStore"]
