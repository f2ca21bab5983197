"""@clara.tool at the level of FastMCP and the Agents SDK (issue 27 §4):
output_schema from the return annotation (and held to by Clara), title,
annotations and idempotent, the docstring's parameter sections, pydantic
models by duck typing, and what clara.current_call() tells a tool and lets
it tell an MCP client (session, cancelled, progress, log)."""

import asyncio
import dataclasses
import json
import threading
import time
import unittest
import urllib.request
from typing import Annotated, Dict, List, Optional, TypedDict

import clara
from clara_testcase import ClaraTestCase

try:
    import pydantic
except ImportError:      # Debian's python3 has no pydantic v2: the duck-typed tests cover it
    pydantic = None


def descriptor(name):
    (desc,) = [t for t in clara.tools() if t["name"] == name]
    return desc


class Movie(TypedDict):
    title: str
    year: int


MOVIE = {"type": "object", "properties": {"title": {"type": "string"}, "year": {"type": "integer"}},
         "required": ["title", "year"], "additionalProperties": False}


@dataclasses.dataclass
class Reading:
    celsius: float
    where: str = "here"
    count: int = dataclasses.field(default=0, init=False)


class TestOutputSchema(ClaraTestCase):

    def test_typeddict_return_is_the_output_schema_and_is_enforced(self):
        @clara.tool
        def movie(wrong: bool = False) -> Movie:
            return {"title": "Alien", "year": "1979" if wrong else 1979}
        self.assertEqual(descriptor("movie")["output_schema"], MOVIE)
        self.assertEqual(clara.call("movie"), {"title": "Alien", "year": 1979})
        with self.assertRaises(clara.ToolFailed) as cm:
            clara.call("movie", wrong=True)
        self.assertEqual(cm.exception.message,
                         'tool "movie": its result does not match output_schema: at /year: got string, want integer')
        self.assertEqual(cm.exception.details, [{"pointer": "/year", "message": "got string, want integer"}])

    def test_dataclass_result_lists_every_field(self):
        # asdict() writes count too (init=False): the result's schema has it.
        @clara.tool
        def read(celsius: float) -> Reading:
            return Reading(celsius)
        self.assertEqual(descriptor("read")["output_schema"], {
            "type": "object",
            "properties": {"celsius": {"type": "number"}, "where": {"type": "string"}, "count": {"type": "integer"}},
            "required": ["celsius", "where", "count"], "additionalProperties": False})
        self.assertEqual(clara.call("read", celsius=21.5), {"celsius": 21.5, "where": "here", "count": 0})

    def test_only_objects_make_an_output_schema(self):
        @clara.tool
        def as_dict() -> Dict[str, int]:
            return {"a": 1}

        @clara.tool
        def as_int() -> int:
            return 1

        @clara.tool
        def as_list() -> List[Movie]:
            return []

        @clara.tool
        def maybe() -> Optional[Movie]:
            return None

        @clara.tool
        def odd() -> "tuple[int, int]":
            return (1, 2)

        @clara.tool
        def bare():
            return 1
        self.assertEqual(descriptor("as_dict")["output_schema"],
                         {"type": "object", "additionalProperties": {"type": "integer"}})
        for name in ("as_int", "as_list", "maybe", "odd", "bare"):
            self.assertNotIn("output_schema", descriptor(name), name)
        self.assertEqual(clara.call("odd"), [1, 2])

    def test_explicit_output_schema(self):
        @clara.tool(output_schema={"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}})
        def count(n: int) -> dict:
            return {"n": n}

        @clara.tool(output_schema={})
        def loose(wrong: bool = False) -> Movie:
            return {"title": 1}      # type: ignore[typeddict-item]
        self.assertEqual(clara.call("count", n=3), {"n": 3})
        with self.assertRaises(clara.ToolFailed):
            clara.call("count", n=-1)
        self.assertNotIn("output_schema", descriptor("loose"))
        self.assertEqual(clara.call("loose"), {"title": 1})


class TestTitleAndAnnotations(ClaraTestCase):

    def test_title_annotations_idempotent(self):
        @clara.tool(title="Fetch a page", capabilities=["network"], idempotent=True,
                    annotations={"readOnlyHint": True, "openWorldHint": None})
        def fetch(url: str) -> str:
            return url
        desc = descriptor("fetch")
        self.assertEqual((desc["title"], desc["idempotent"], desc["annotations"]),
                         ("Fetch a page", True, {"readOnlyHint": True}))
        mcp = [t for t in clara.call("tools_list", format="mcp")["tools"] if t["name"] == "fetch"][0]
        self.assertEqual(mcp["title"], "Fetch a page")
        self.assertEqual(mcp["annotations"], {"readOnlyHint": True, "idempotentHint": True, "openWorldHint": True})

    def test_annotations_object_like_mcp_types(self):
        class ToolAnnotations:   # what mcp.types.ToolAnnotations (a pydantic model) offers
            def model_dump(self, exclude_none=False):
                return {"title": "Wipe", "destructiveHint": True} if exclude_none else \
                    {"title": "Wipe", "destructiveHint": True, "readOnlyHint": None}

        @clara.tool(annotations=ToolAnnotations(), capabilities=["fs_write"])
        def wipe(path: str) -> None:
            pass
        desc = descriptor("wipe")
        self.assertEqual((desc["title"], desc["annotations"]), ("Wipe", {"destructiveHint": True}))

    def test_refusals(self):
        def f() -> None:
            pass
        with self.assertRaisesRegex(TypeError, "unknown annotation 'readOnly'"):
            clara.tool(annotations={"readOnly": True})(f)
        with self.assertRaisesRegex(TypeError, "readOnlyHint must be a bool"):
            clara.tool(annotations={"readOnlyHint": "yes"})(f)
        with self.assertRaisesRegex(TypeError, "annotations is a dict"):
            clara.tool(annotations=["readOnlyHint"])(f)
        # Clara refuses a hint the capabilities contradict, and says why on its log.
        messages = []
        clara.set_log_handler(lambda level, message: messages.append(message), clara.CLARA_LOG_ERROR)
        with self.assertRaises(clara.RegistrationError):
            clara.tool(capabilities=["fs_write"], annotations={"readOnlyHint": True})(f)
        self.assertIn('annotations.readOnlyHint is true, but its capability "fs_write" changes what lies outside the tool',
                      messages[-1])


class TestDocstring(ClaraTestCase):

    def test_google_args_describe_the_parameters(self):
        @clara.tool
        def book(city: str, seats: int = 2, note: Annotated[str, "kept"] = "") -> str:
            """Books a table.

            Args:
                city: Where to eat.
                seats (int): How many people,
                    children included.
                note: Never used: Annotated wins.

            Returns:
                A confirmation.
            """
            return city
        desc = descriptor("book")
        self.assertEqual(desc["description"], "Books a table.\n\nReturns:\n    A confirmation.")
        props = desc["input_schema"]["properties"]
        self.assertEqual(props["city"], {"type": "string", "description": "Where to eat."})
        self.assertEqual(props["seats"]["description"], "How many people, children included.")
        self.assertEqual(props["note"]["description"], "kept")

    def test_numpy_and_sphinx(self):
        @clara.tool
        def numpy_style(a: int, b: int) -> int:
            """Adds.

            Parameters
            ----------
            a : int
                The first.
            b : int
                The second.
            """
            return a + b

        @clara.tool(description="Subtracts.")
        def sphinx_style(a: int, b: int) -> int:
            """Ignored: description= wins for the text.

            :param a: The first.
            :param int b: The second,
                taken away.
            :type b: int
            """
            return a - b
        desc = descriptor("numpy_style")
        self.assertEqual(desc["description"], "Adds.")
        self.assertEqual([desc["input_schema"]["properties"][k]["description"] for k in "ab"], ["The first.", "The second."])
        desc = descriptor("sphinx_style")
        self.assertEqual(desc["description"], "Subtracts.")
        self.assertEqual([desc["input_schema"]["properties"][k]["description"] for k in "ab"],
                         ["The first.", "The second, taken away."])


class FakeModel:
    """Quacks like a pydantic v2 model (model_json_schema, model_validate,
    model_dump), without pydantic."""

    SCHEMA: dict = {}

    def __init__(self, **fields):
        self.__dict__.update(fields)

    @classmethod
    def model_json_schema(cls, mode="validation"):
        return json.loads(json.dumps(cls.SCHEMA))

    @classmethod
    def model_validate(cls, value):
        return cls(**{k: (Country.model_validate(v) if k == "country" else v) for k, v in value.items()})

    def model_dump(self, mode="python"):
        return {k: (v.model_dump(mode=mode) if isinstance(v, FakeModel) else v) for k, v in self.__dict__.items()}


class Country(FakeModel):
    SCHEMA = {"properties": {"code": {"maxLength": 2, "minLength": 2, "title": "Code", "type": "string"}},
              "required": ["code"], "title": "Country", "type": "object"}


class Address(FakeModel):
    # As pydantic writes a model with a nested one: $defs at its top.
    SCHEMA = {"$defs": {"Country": Country.SCHEMA},
              "properties": {"street": {"title": "Street", "type": "string"},
                             "country": {"$ref": "#/$defs/Country"}},
              "required": ["street", "country"], "title": "Address", "type": "object"}


class TestPydanticDuckTyped(ClaraTestCase):

    def test_model_parameter_and_result(self):
        seen = []

        @clara.tool
        def ship(to: Address, also: Optional[List[Address]] = None) -> Address:
            seen.append((to, also))
            return to
        desc = descriptor("ship")
        schema = desc["input_schema"]
        # The model's $defs moved to the top, where its $ref points.
        self.assertEqual(schema["$defs"], {"Country": Country.SCHEMA})
        self.assertEqual(schema["properties"]["to"]["properties"]["country"], {"$ref": "#/$defs/Country"})
        self.assertNotIn("$defs", schema["properties"]["to"])
        self.assertEqual(desc["output_schema"]["$defs"], {"Country": Country.SCHEMA})
        out = clara.call("ship", to={"street": "Main St", "country": {"code": "FR"}},
                         also=[{"street": "Side St", "country": {"code": "DE"}}])
        self.assertEqual(out, {"street": "Main St", "country": {"code": "FR"}})
        to, also = seen[-1]
        self.assertIsInstance(to, Address)
        self.assertIsInstance(to.country, Country)
        self.assertIsInstance(also[0], Address)
        # Clara validates against the model's schema, $ref included.
        with self.assertRaises(clara.InvalidArgs) as cm:
            clara.call("ship", to={"street": "Main St", "country": {"code": "FRA"}})
        self.assertEqual(cm.exception.details[0]["pointer"], "/to/country/code")

    def test_clashing_definitions_refused(self):
        class Other(FakeModel):
            SCHEMA = {"$defs": {"Country": {"type": "string"}}, "type": "object",
                      "properties": {"c": {"$ref": "#/$defs/Country"}}}

        def f(a: Address, b: Other) -> None:
            pass
        with self.assertRaisesRegex(TypeError, "two different types are both called 'Country'"):
            clara.tool(f)


@unittest.skipIf(pydantic is None or not hasattr(pydantic, "model_validator"), "pydantic v2 is not installed")
class TestRealPydantic(ClaraTestCase):

    def test_pydantic_model(self):
        class Country(pydantic.BaseModel):
            code: str = pydantic.Field(min_length=2, max_length=2)

        class Address(pydantic.BaseModel):
            street: str
            country: Country

        @clara.tool
        def ship(to: Address) -> Address:
            assert isinstance(to.country, Country)
            return to
        self.assertIn("Country", descriptor("ship")["input_schema"]["$defs"])
        self.assertEqual(clara.call("ship", to={"street": "Main St", "country": {"code": "FR"}}),
                         {"street": "Main St", "country": {"code": "FR"}})
        with self.assertRaises(clara.InvalidArgs):
            clara.call("ship", to={"street": "Main St", "country": {"code": "FRA"}})


class TestCurrentCall(ClaraTestCase):

    def test_session_and_cancelled_in_a_call(self):
        @clara.tool
        def whoami() -> dict:
            call = clara.current_call()
            call.progress(1, 2, "nobody listens: nothing happens")
            call.info("nor here")
            return {"session": call.session, "cancelled": call.cancelled}
        self.assertEqual(clara.call("whoami"), {"session": "default", "cancelled": False})
        with clara.Session("s-42") as s:
            self.assertEqual(s.call("whoami"), {"session": "s-42", "cancelled": False})

    def test_after_the_call(self):
        kept = []

        @clara.tool
        def keep() -> None:
            kept.append(clara.current_call())
        clara.call("keep")
        with self.assertRaisesRegex(RuntimeError, "no longer running"):
            kept[0].session
        self.assertTrue(kept[0].cancelled)
        kept[0].progress(1)
        kept[0].log("ignored")

    def test_log_levels(self):
        errors = []

        @clara.tool
        def levels() -> None:
            call = clara.current_call()
            for level in ("debug", "info", "warning", "warn", "error", clara.CLARA_LOG_ERROR):
                call.log("x", level)
            for bad in ("fatal", 7, True):
                try:
                    call.log("x", bad)
                except ValueError as e:
                    errors.append(str(e))
        clara.call("levels")
        self.assertEqual(len(errors), 3)
        self.assertIn("level must be", errors[0])

    def test_a_sync_tool_sees_its_deadline(self):
        ran = []

        @clara.tool(limits={"timeout_ms": 80})
        def long_job() -> str:
            t0 = time.monotonic()
            while not clara.current_call().cancelled and time.monotonic() - t0 < 5:
                time.sleep(0.005)
            ran.append(time.monotonic() - t0)
            return "stopped"
        with self.assertRaises(clara.Timeout):
            clara.call("long_job")
        for _ in range(500):
            if ran:
                break
            time.sleep(0.01)
        self.assertTrue(ran and 0.07 <= ran[0] < 2, ran)

    def test_an_async_tool_is_cancelled_at_its_deadline(self):
        outcome = []
        done = threading.Event()

        @clara.tool(limits={"timeout_ms": 80})
        async def sleepy() -> str:
            try:
                await asyncio.sleep(5)
                outcome.append("slept")
            except asyncio.CancelledError:
                outcome.append("cancelled")
                raise
            finally:
                done.set()
            return "late"
        t0 = time.monotonic()
        with self.assertRaises(clara.Timeout):
            clara.call("sleepy")
        self.assertTrue(done.wait(3), "the coroutine ran on")
        self.assertLess(time.monotonic() - t0, 2)
        self.assertEqual(outcome, ["cancelled"])


def rpc_all(url, body, session=None):
    """An MCP request over Streamable HTTP: every message the server sent
    on the request's stream (notifications, then the response)."""
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": "2025-11-25"}
    if session:
        headers["Mcp-Session-Id"] = session
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method="POST")
    with urllib.request.urlopen(req, timeout=30) as resp:
        sid = resp.headers.get("Mcp-Session-Id")
        text = resp.read().decode()
        kind = resp.headers.get_content_type()
    if not text.strip():
        return [], sid
    if kind == "text/event-stream":
        return [json.loads(line[len("data:"):]) for line in text.splitlines() if line.startswith("data:")], sid
    return [json.loads(text)], sid


class TestCurrentCallOverMCP(ClaraTestCase):

    def tearDown(self):
        clara.mcp_stop()
        super().tearDown()

    def test_progress_log_and_session_reach_the_client(self):
        @clara.tool(title="Steps", annotations={"idempotentHint": True})
        def steps(n: int) -> Dict[str, str]:
            """Counts to n.

            Args:
                n: How far.
            """
            call = clara.current_call()
            call.debug("below the client's level")
            for i in range(1, n + 1):
                call.progress(i, n, "step %d" % i)
            call.warning("counted")
            return {"session": call.session}

        url = clara.mcp_listen("127.0.0.1:0")
        (init,), sid = rpc_all(url, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "py", "version": "1"}}})
        self.assertIn("logging", init["result"]["capabilities"])
        rpc_all(url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, sid)
        (listed,), _ = rpc_all(url, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, sid)
        (tool,) = [t for t in listed["result"]["tools"] if t["name"] == "steps"]
        self.assertEqual(tool["title"], "Steps")
        self.assertEqual(tool["description"], "Counts to n.")
        self.assertEqual(tool["inputSchema"]["properties"]["n"], {"type": "integer", "description": "How far."})
        self.assertEqual(tool["outputSchema"], {"type": "object", "additionalProperties": {"type": "string"}})
        self.assertTrue(tool["annotations"]["idempotentHint"])
        rpc_all(url, {"jsonrpc": "2.0", "id": 3, "method": "logging/setLevel", "params": {"level": "info"}}, sid)
        messages, _ = rpc_all(url, {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
            "name": "steps", "arguments": {"n": 2}, "_meta": {"progressToken": "p1"}}}, sid)
        notes = [(m["method"], m["params"]) for m in messages if "method" in m]
        self.assertEqual(notes, [
            ("notifications/progress", {"progressToken": "p1", "progress": 1, "total": 2, "message": "step 1"}),
            ("notifications/progress", {"progressToken": "p1", "progress": 2, "total": 2, "message": "step 2"}),
            ("notifications/message", {"level": "warning", "logger": "steps", "data": "counted"}),
        ])
        result = messages[-1]["result"]
        self.assertRegex(result["structuredContent"]["session"], r"^mcp-")


if __name__ == "__main__":
    unittest.main()
