"""The door of ``handoffs/`` (docs/architecture.md, "Doors"): the control tools a model may call, the loop-safety
rules, a move and its rows, a conversation's handoffs, and the table's monthly partitions. Its models are imported
from ``handoffs.models``."""

from __future__ import annotations

from handoffs.partitions import MonthPartition, month_partitions, partition_drop, partition_rows
from handoffs.safety import REFUSED_NOT_ALLOWED, STOP_STEP_LIMIT, move_check, stop_summary
from handoffs.selectors import handoff_list_for_conversation
from handoffs.services import Move, handoff_rows, moves_kinds
from handoffs.tools import (
    CONTROL_TOOLS,
    END_SUB_CONVERSATION,
    REQUEST_HANDOFF,
    REQUEST_HUMAN,
    REQUEST_SUB_CONVERSATION,
    STATUS_OUT_OF_SCOPE,
    UNTARGETED,
    ControlCall,
    ControlTool,
)

__all__ = [
    "CONTROL_TOOLS",
    "END_SUB_CONVERSATION",
    "REFUSED_NOT_ALLOWED",
    "REQUEST_HANDOFF",
    "REQUEST_HUMAN",
    "REQUEST_SUB_CONVERSATION",
    "STATUS_OUT_OF_SCOPE",
    "STOP_STEP_LIMIT",
    "UNTARGETED",
    "ControlCall",
    "ControlTool",
    "MonthPartition",
    "Move",
    "handoff_list_for_conversation",
    "handoff_rows",
    "month_partitions",
    "move_check",
    "moves_kinds",
    "partition_drop",
    "partition_rows",
    "stop_summary",
]
