"""The A2A face's JSON-RPC dispatcher: the SDK's (``a2a-sdk``), strict where the SDK is lenient or loose.

* **Enums are read strictly.** The SDK parses a request's params with ``ignore_unknown_fields`` (unknown fields are
  ignored for forward compatibility), which also turns an enum value the protocol does not define into the enum's
  zero, ``…_UNSPECIFIED``: ``ListTasks`` by ``"status": "INVALID_STATUS"`` would list every task. Here such a value is
  the protocol's invalid params (``-32602``) naming the field, before the SDK reads the request.
* **A method of the other version.** The 0.3 method names (``message/send``…) are served beside the 1.0 ones; a
  request that names a 0.3 method and says ``A2A-Version: 1.0`` asks for a method 1.0 does not have: the spec's
  "process requests using the semantics of the requested A2A-Version" makes it ``-32601`` method not found, naming
  the 1.0 method (the SDK's 0.3 adapter would answer ``-32603`` internal error).
* **Whole numbers are written as integers.** A message's ``metadata`` is a protobuf ``Struct``, whose numbers are
  doubles, so the SDK writes the answer's ``message_id`` as ``686.0``; here a whole number is written ``686``, as
  JSON Schema and the platform's other faces write an id.
"""

from __future__ import annotations

import json
import math
from collections.abc import AsyncGenerator
from typing import Any

from a2a.compat.v0_3.jsonrpc_adapter import JSONRPC03Adapter
from a2a.server.context import ServerCallContext
from a2a.server.jsonrpc_models import MethodNotFoundError
from a2a.server.request_handlers.response_helpers import build_error_response
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.types import InvalidParamsError
from a2a.utils.constants import VERSION_HEADER
from django.conf import settings
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

ERROR_ENUM = "{field} must be one of the protocol's {enum} values ({names}): {value} is not one."
ERROR_OLDER_METHOD = (
    "{method} is a method of A2A 0.3, and this request says A2A-Version {version}: call {newer}, or send "
    "A2A-Version: 0.3."
)
# The 1.0 name of each 0.3 method the SDK's adapter serves (the spec's section on the JSON-RPC binding).
NEWER_METHOD = {
    "message/send": "SendMessage",
    "message/stream": "SendStreamingMessage",
    "tasks/get": "GetTask",
    "tasks/cancel": "CancelTask",
    "tasks/resubscribe": "SubscribeToTask",
    "tasks/pushNotificationConfig/set": "CreateTaskPushNotificationConfig",
    "tasks/pushNotificationConfig/get": "GetTaskPushNotificationConfig",
    "tasks/pushNotificationConfig/list": "ListTaskPushNotificationConfigs",
    "tasks/pushNotificationConfig/delete": "DeleteTaskPushNotificationConfig",
    "agent/getAuthenticatedExtendedCard": "GetExtendedAgentCard",
}
_WHOLE_MAX = 2**53  # a double holds every whole number up to here exactly


def enum_faults(params: Any, descriptor: Descriptor, at: str = "") -> dict[str, list[str]]:
    """Every enum value in ``params`` (a request's JSON params, read as the message ``descriptor``) that the enum does
    not define, by the field's path (``status``, ``message.role``); by name or number, as protobuf's JSON reads
    enums. Unknown fields and other faults are left to the SDK's parse."""
    if not isinstance(params, dict) or descriptor.full_name.startswith("google.protobuf."):
        return {}
    faults: dict[str, list[str]] = {}
    fields = {**descriptor.fields_by_name, **{field.json_name: field for field in descriptor.fields}}
    for name, value in params.items():
        field = fields.get(name)
        if field is None:
            continue
        path = f"{at}{field.json_name}"
        values = value if isinstance(value, list) and field.is_repeated else [value]
        if field.type == FieldDescriptor.TYPE_ENUM:
            enum = field.enum_type
            for item in values:
                known = enum.values_by_name if isinstance(item, str) else enum.values_by_number
                if isinstance(item, str | int) and not isinstance(item, bool) and item not in known:
                    names = ", ".join(enum.values_by_name)
                    message = ERROR_ENUM.format(field=path, enum=enum.name, names=names, value=json.dumps(item))
                    faults.setdefault(path, []).append(message)
        elif field.type == FieldDescriptor.TYPE_MESSAGE and not field.message_type.GetOptions().map_entry:
            for index, item in enumerate(values):
                inner = f"{path}[{index}]." if field.is_repeated else f"{path}."
                faults.update(enum_faults(item, field.message_type, inner))
    return faults


def whole_numbers(value: Any) -> Any:
    """``value`` (a response's JSON) with every whole-numbered double written as an integer."""
    if isinstance(value, float) and value.is_integer() and math.fabs(value) <= _WHOLE_MAX:
        return int(value)
    if isinstance(value, dict):
        return {name: whole_numbers(item) for name, item in value.items()}
    if isinstance(value, list):
        return [whole_numbers(item) for item in value]
    return value


async def _whole_numbers_streamed(stream: AsyncGenerator[dict[str, Any]]) -> AsyncGenerator[dict[str, Any]]:
    async for item in stream:
        yield whole_numbers(item)


def _requested_major(request: Request) -> int | None:
    """The major version ``A2A-Version`` names; ``None`` when absent (0.3, the spec says) or unreadable, which the
    SDK's own check answers."""
    major = request.headers.get(VERSION_HEADER, "").strip().partition(".")[0]
    return int(major) if major.isdigit() else None


class Dispatcher(JsonRpcDispatcher):
    """The SDK's dispatcher with this module's three rules (module docstring)."""

    async def handle_requests(self, request: Request) -> Response:
        try:
            body = await request.json()
        except ValueError:
            body = None  # the SDK answers it with its parse error
        method = body.get("method") if isinstance(body, dict) else None
        if not isinstance(method, str):
            return await super().handle_requests(request)
        request_id = body.get("id") if isinstance(body.get("id"), str | int) else None
        major = _requested_major(request)
        if method in JSONRPC03Adapter.METHOD_TO_MODEL and major is not None and major >= 1:
            version = request.headers[VERSION_HEADER]
            newer = NEWER_METHOD.get(method, "its 1.0 name")
            message = ERROR_OLDER_METHOD.format(method=method, version=version, newer=newer)
            return JSONResponse(build_error_response(request_id, MethodNotFoundError(message=message)))
        model: Any = self.METHOD_TO_MODEL.get(method)  # a protobuf message class (the SDK types it ``type``)
        faults = enum_faults(body.get("params"), model.DESCRIPTOR) if model is not None else {}
        if faults:
            error = InvalidParamsError(next(iter(faults.values()))[0], data={"fields": faults})
            return JSONResponse(build_error_response(request_id, error))
        return await super().handle_requests(request)

    def _create_response(
        self, context: ServerCallContext, handler_result: AsyncGenerator[dict[str, Any]] | dict[str, Any]
    ) -> Response:
        if settings.STOCK_PATHS:  # the SDK's own response path (docs/decisions/a2a-whole-numbers.md)
            return super()._create_response(context, handler_result)
        if isinstance(handler_result, AsyncGenerator):
            return super()._create_response(context, _whole_numbers_streamed(handler_result))
        return super()._create_response(context, whole_numbers(handler_result))
