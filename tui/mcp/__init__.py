"""dsh as a Model Context Protocol server (``dsh mcp``): any MCP client (Claude Code, Codex,
…) finds, searches and reads the user's sessions, read-only, as the user dsh connects as."""

from tui.mcp.serve import run_mcp, serve

__all__ = ["run_mcp", "serve"]
