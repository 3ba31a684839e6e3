"""Raw assistant text -> one parsed turn. The rules live in `agent.protocol`; this module
names the reading side of it for callers that only parse."""

from __future__ import annotations

from agent.confidence import verdict_char_index, yes_share
from agent.protocol import Kind, ParsedTurn, parse_turn

__all__ = ["Kind", "ParsedTurn", "parse_turn", "verdict_char_index", "yes_share"]
