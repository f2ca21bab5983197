# SPDX-License-Identifier: MIT
"""clara.Session: calls, chats and events that carry one session's name."""

from __future__ import annotations

from types import TracebackType
from typing import Any, Dict, Optional, Type

from . import _binding


class Session:
    """A named session (SPEC §5.2): it scopes kv_* data, rule history and
    state, notices, session policy and callback activation. Sessions are
    created on first use; end() emits on_session_end and frees the
    session's in-memory data (state in SQLite stays).

        with clara.Session("worker-1") as s:
            s.call("kv_set", key="k", value=1)
            s.call("kv_get", key="k")["value"]   # -> 1

    Used as a context manager, the session is ended on exit. A Session is a
    name and a Clara instance: it is cheap, and safe to share between
    threads.
    """

    def __init__(self, name: str, *, client: Optional[_binding.Clara] = None) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError("a session name is a non-empty str")
        self.name = name
        self._client = client

    def __repr__(self) -> str:
        return "clara.Session(%r)" % self.name

    def _c(self) -> _binding.Clara:
        return self._client if self._client is not None else _binding.default()

    def call(self, tool: str, /, **arguments: Any) -> Any:
        """clara.call() in this session."""
        return self._c()._call(tool, arguments, self.name)

    async def call_async(self, tool: str, /, **arguments: Any) -> Any:
        """clara.call_async() in this session."""
        return await self._c()._call_async(tool, arguments, self.name)

    def evaluate(self, request: Dict[str, Any]) -> Dict[str, Any]:
        """clara.evaluate() of a request dict, with "session" set to this
        session unless the request names one."""
        if "session" not in request:
            request = dict(request, session=self.name)
        return self._c().evaluate(request)

    def chat(self, prompt: Optional[str] = None, /, **arguments: Any) -> Any:
        """Call the chat tool (SPEC §10.2) in this session: chat("text")
        sends prompt="text"; other arguments (messages, system, model,
        tools, max_tool_calls, ...) go as they are. Returns the chat's result
        ({content, tool_calls, finish_reason, usage}); raises ClaraError as
        call() does."""
        if prompt is not None:
            arguments["prompt"] = prompt
        return self._c()._call("chat", arguments, self.name)

    def emit(self, event: str, payload: Any = None, trace: bool = False) -> Dict[str, Any]:
        """clara.emit() of an event in this session; returns the envelope."""
        return self._c().emit(event, payload, session=self.name, trace=trace)

    def end(self) -> Any:
        """End the session (the session_end tool): on_session_end is emitted
        and the session's in-memory data freed. Returns the tool's result.
        Using the session again afterwards starts it afresh."""
        return self._c()._call("session_end", {"session": self.name}, self.name)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        self.end()
