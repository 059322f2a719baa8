"""dsh as an Agent Client Protocol agent (``dsh acp``): editors such as Zed talk to it over
JSON-RPC on stdio, on the same store, engine and session-reference service as the TUI."""

from tui.acp.agent import DshAcpAgent
from tui.acp.serve import OFFLINE_DELAY_ENV, run_acp, serve

__all__ = ["OFFLINE_DELAY_ENV", "DshAcpAgent", "run_acp", "serve"]
