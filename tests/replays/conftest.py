"""The replays are drawn like the UI snapshots (``tests/ui/snapshots.pinned_environment``)."""

from tests.ui.snapshots import pinned_environment

__all__ = ["pinned_environment"]
