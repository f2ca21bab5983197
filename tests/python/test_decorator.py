"""@clara.tool: the input schema built from type hints (each supported hint
against a schema written by hand), the descriptor's other keys, how the
function is called, and what is refused."""

import dataclasses
import sys
import typing
import unittest
from typing import Annotated, Any, Dict, List, Literal, Optional, TypedDict, Union

import clara
from clara import _binding
from clara_testcase import ClaraTestCase

INT, NUM, STR, BOOL, NULL = ({"type": "integer"}, {"type": "number"}, {"type": "string"},
                             {"type": "boolean"}, {"type": "null"})


@dataclasses.dataclass
class Point:
    x: float
    y: float = 0.0
    label: Optional[str] = None
    tags: List[str] = dataclasses.field(default_factory=list)
    hidden: int = dataclasses.field(default=0, init=False)


POINT = {"type": "object",
         "properties": {"x": NUM, "y": {"type": "number", "default": 0.0},
                        "label": {"anyOf": [STR, NULL], "default": None},
                        "tags": {"type": "array", "items": STR}},
         "required": ["x"], "additionalProperties": False}


@dataclasses.dataclass
class Segment:
    start: Point
    end: Point


class Movie(TypedDict):
    title: str
    year: int


class MovieExtra(Movie, total=False):
    rating: float


class Node(TypedDict):
    name: str
    children: List["Node"]


def schema_of(fn):
    """The input_schema @tool registers for fn (read back from Clara)."""
    clara.tool(fn)
    (desc,) = [t for t in clara.tools() if t["name"] == fn.__name__]
    return desc["input_schema"]


def one(hint):
    """The schema of a parameter typed `hint`."""
    def f(value):
        return value
    f.__annotations__ = {"value": hint}
    f.__name__ = "one"
    return schema_of(f)["properties"]["value"]


class TestSchema(ClaraTestCase):
    """Each supported hint, compared with the schema written by hand."""

    def assertHint(self, hint, expected):
        with self.subTest(hint=hint):
            self.assertEqual(one(hint), expected)

    def test_scalars(self):
        self.assertHint(int, INT)
        self.assertHint(float, NUM)
        self.assertHint(str, STR)
        self.assertHint(bool, BOOL)
        self.assertHint(None, NULL)
        self.assertHint(type(None), NULL)
        self.assertHint(Any, {})
        self.assertHint(object, {})

    def test_lists(self):
        self.assertHint(list, {"type": "array"})
        self.assertHint(List, {"type": "array"})
        self.assertHint(list[int], {"type": "array", "items": INT})
        self.assertHint(List[str], {"type": "array", "items": STR})
        self.assertHint(list[list[bool]], {"type": "array", "items": {"type": "array", "items": BOOL}})

    def test_dicts(self):
        self.assertHint(dict, {"type": "object"})
        self.assertHint(Dict, {"type": "object"})
        self.assertHint(dict[str, float], {"type": "object", "additionalProperties": NUM})
        self.assertHint(Dict[str, list[int]],
                        {"type": "object", "additionalProperties": {"type": "array", "items": INT}})
        self.assertHint(dict[str, Any], {"type": "object", "additionalProperties": {}})

    def test_optional_and_union(self):
        self.assertHint(Optional[int], {"anyOf": [INT, NULL]})
        self.assertHint(Union[int, None], {"anyOf": [INT, NULL]})
        self.assertHint(Union[int, str], {"anyOf": [INT, STR]})
        self.assertHint(Union[int, str, None], {"anyOf": [INT, STR, NULL]})
        self.assertHint(Optional[list[str]], {"anyOf": [{"type": "array", "items": STR}, NULL]})
        if sys.version_info >= (3, 10):
            self.assertHint(eval("int | None"), {"anyOf": [INT, NULL]})
            self.assertHint(eval("str | float"), {"anyOf": [STR, NUM]})

    def test_literal(self):
        self.assertHint(Literal["a", "b"], {"type": "string", "enum": ["a", "b"]})
        self.assertHint(Literal[1, 2, 3], {"type": "integer", "enum": [1, 2, 3]})
        self.assertHint(Literal[True], {"type": "boolean", "enum": [True]})
        self.assertHint(Literal["x", 1, None], {"enum": ["x", 1, None]})
        self.assertHint(Optional[Literal["on", "off"]], {"anyOf": [{"type": "string", "enum": ["on", "off"]}, NULL]})

    def test_typeddict(self):
        movie = {"type": "object", "properties": {"title": STR, "year": INT},
                 "required": ["title", "year"], "additionalProperties": False}
        self.assertHint(Movie, movie)
        self.assertHint(MovieExtra, {"type": "object", "properties": {"title": STR, "year": INT, "rating": NUM},
                                     "required": ["title", "year"], "additionalProperties": False})
        self.assertHint(list[Movie], {"type": "array", "items": movie})
        if hasattr(typing, "NotRequired"):
            class Partial(TypedDict):
                a: int
                b: typing.NotRequired[str]
            self.assertHint(Partial, {"type": "object", "properties": {"a": INT, "b": STR},
                                      "required": ["a"], "additionalProperties": False})

    def test_dataclasses(self):
        self.assertHint(Point, POINT)
        self.assertHint(Segment, {"type": "object", "properties": {"start": POINT, "end": POINT},
                                  "required": ["start", "end"], "additionalProperties": False})
        self.assertHint(Optional[Point], {"anyOf": [POINT, NULL]})
        self.assertHint(dict[str, Point], {"type": "object", "additionalProperties": POINT})

    def test_annotated_description(self):
        self.assertHint(Annotated[int, "how many"], {"type": "integer", "description": "how many"})
        self.assertHint(Annotated[list[str], 42, "names"],
                        {"type": "array", "items": STR, "description": "names"})
        self.assertHint(Annotated[float, 42], NUM)

    def test_whole_function(self):
        def book(title: str, copies: int = 1, *, shelf: Optional[str] = None, tags: list[str] = ["new"],
                 where=None, price: float) -> dict:
            return {}
        self.assertEqual(schema_of(book), {
            "type": "object",
            "properties": {
                "title": STR,
                "copies": {"type": "integer", "default": 1},
                "shelf": {"anyOf": [STR, NULL], "default": None},
                "tags": {"type": "array", "items": STR, "default": ["new"]},
                "where": {"default": None},
                "price": NUM,
            },
            "required": ["title", "price"],
            "additionalProperties": False,
        })

    def test_defaults_not_plain_json_are_not_written(self):
        marker = object()

        def f(a: Any = marker, b: float = float("inf"), c: Point = Point(1.0)) -> None:
            pass
        self.assertEqual(schema_of(f)["properties"], {"a": {}, "b": NUM, "c": POINT})
        self.assertNotIn("required", schema_of(f))

    def test_kwargs(self):
        def untyped(a: int, **rest):
            pass

        def typed(a: int, **rest: str):
            pass

        def anything(**rest: Any):
            pass
        self.assertEqual(schema_of(untyped), {"type": "object", "properties": {"a": INT}, "required": ["a"]})
        self.assertEqual(schema_of(typed), {"type": "object", "properties": {"a": INT}, "required": ["a"],
                                            "additionalProperties": STR})
        self.assertEqual(schema_of(anything), {"type": "object", "properties": {}})

    def test_no_parameters(self):
        def nothing():
            return 1
        self.assertEqual(schema_of(nothing), {"type": "object", "properties": {}, "additionalProperties": False})

    def test_string_annotations(self):
        # As `from __future__ import annotations` writes them.
        def later(p: "Point", n: "Optional[int]" = None) -> "int":
            return 0
        self.assertEqual(schema_of(later), {"type": "object",
                                            "properties": {"p": POINT, "n": {"anyOf": [INT, NULL], "default": None}},
                                            "required": ["p"], "additionalProperties": False})


class TestRefused(ClaraTestCase):

    def assertRefused(self, fn, *words):
        with self.assertRaises(TypeError) as cm:
            clara.tool(fn)
        for w in words:
            self.assertIn(w, str(cm.exception))
        self.assertEqual(clara.evaluate({"tool": fn.__name__})["error"], "unknown_tool")

    def test_unsupported_hints(self):
        def t1(a: tuple):
            pass

        def t2(a: set[int]):
            pass

        def t3(a: dict[int, str]):
            pass

        def t4(a: ClaraTestCase):
            pass

        def t5(a: list[complex]):
            pass

        def t6(a: Literal[1.5]):
            pass
        self.assertRefused(t1, "parameter 'a'", "unsupported type hint tuple")
        self.assertRefused(t2, "parameter 'a'", "unsupported type hint")
        self.assertRefused(t3, "dict keys must be str")
        self.assertRefused(t4, "unsupported type hint ClaraTestCase")
        self.assertRefused(t5, "parameter 'a'[]", "complex")
        self.assertRefused(t6, "Literal values")

    def test_parameters_not_given_by_name(self):
        def star(*args: int):
            pass

        def positional(a: int, /):
            pass
        self.assertRefused(star, "*args")
        self.assertRefused(positional, "positional-only")

    def test_recursive_types(self):
        def tree(root: Node):
            pass
        self.assertRefused(tree, "refers to itself")

        # With a schema written by hand, the same hint is fine (left as JSON).
        @clara.tool(input_schema={"type": "object"})
        def tree2(root: Node) -> str:
            return root["name"]
        self.assertEqual(clara.call("tree2", root={"name": "r", "children": []}), "r")

    def test_unresolvable_hint(self):
        def f(a: "NoSuchType"):  # noqa: F821
            pass
        self.assertRefused(f, "cannot read the type hints", "NoSuchType")

    def test_not_a_function(self):
        with self.assertRaises(TypeError):
            clara.tool(42)


class TestDescriptor(ClaraTestCase):

    def descriptor(self, name):
        (desc,) = [t for t in clara.tools() if t["name"] == name]
        return desc

    def test_name_and_docstring(self):
        @clara.tool
        def greet(who: str) -> str:
            """Says hello.

            More words."""
            return "hello " + who
        desc = self.descriptor("greet")
        self.assertEqual(desc["description"], "Says hello.\n\nMore words.")
        self.assertEqual((desc["returns"], desc["llm_visible"], desc["builtin"]), ("json", True, False))

    def test_no_docstring(self):
        @clara.tool
        def bare() -> None:
            pass
        self.assertEqual(self.descriptor("bare")["description"], "")

    def test_every_option(self):
        schema = {"type": "object", "properties": {"q": {"type": "string", "minLength": 2}},
                  "required": ["q"], "additionalProperties": False}

        @clara.tool(name="search_web", description="Searches.", input_schema=schema,
                    limits={"timeout_ms": 1500, "rate_per_min": 7, "max_concurrency": 2},
                    capabilities=["network"], llm_visible=False)
        def search(q: int, unused: bool = True) -> list:
            return [q]
        desc = self.descriptor("search_web")
        self.assertEqual(desc["input_schema"], schema)       # the explicit schema wins over the hints
        self.assertEqual(desc["description"], "Searches.")
        self.assertEqual(desc["capabilities"], ["network"])
        self.assertEqual(desc["limits"]["timeout_ms"], 1500)
        self.assertEqual(desc["limits"]["rate_per_min"], 7)
        self.assertEqual(desc["limits"]["max_concurrency"], 2)
        self.assertFalse(desc["llm_visible"])
        self.assertEqual(clara.call("search_web", q="ab"), ["ab"])
        with self.assertRaises(clara.InvalidArgs):
            clara.call("search_web", q="a")

    def test_on_caller_thread_and_changes_files(self):
        import threading

        @clara.tool(on_caller_thread=True, changes_files=["path", "/more/0"])
        def here(path: str, more: Optional[List[str]] = None) -> int:
            return threading.get_ident()

        @clara.tool
        def there(path: str) -> int:
            return threading.get_ident()
        desc = self.descriptor("here")
        self.assertIs(desc["on_caller_thread"], True)
        self.assertEqual(desc["changes_files"], ["path", "/more/0"])
        self.assertNotIn("on_caller_thread", self.descriptor("there"))
        # The thread that called clara_evaluate runs the first; one of
        # Clara's workers the second.
        self.assertEqual(clara.call("here", path="a.txt"), threading.get_ident())
        self.assertNotEqual(clara.call("there", path="a.txt"), threading.get_ident())
        with self.assertRaises(TypeError):
            clara.tool(changes_files="path")(there)

    def test_refused_by_clara(self):
        logged = []
        self.lib.set_log_handler(lambda level, message: logged.append(message), clara.CLARA_LOG_ERROR)
        with self.assertRaises(clara.RegistrationError) as cm:
            @clara.tool
            def echo(message: str) -> str:
                return message
        self.assertEqual((cm.exception.errno, cm.exception.name), (clara.CLARA_EPERM, "echo"))
        with self.assertRaises(clara.RegistrationError) as cm:
            clara.tool(name="bad name")(lambda: 1)
        self.assertEqual(cm.exception.errno, clara.CLARA_EINVAL)
        self.assertEqual(logged, ['clara_register_tool: cannot replace "echo": it is a built-in tool',
                                  "clara_register_tool: invalid tool name \"bad name\": use 1 to 64 letters, "
                                  "digits, '_' or '-'"])
        with _binding._tool_lock:
            self.assertEqual(_binding._tool_keepalive, {})


class TestCalls(ClaraTestCase):

    def test_returns_the_function(self):
        def double(n: int) -> int:
            return 2 * n
        self.assertIs(clara.tool(double), double)
        self.assertIs(clara.tool(name="twice")(double), double)
        self.assertEqual(double(4), 8)
        self.assertEqual((clara.call("double", n=4), clara.call("twice", n=5)), (8, 10))

    def test_keyword_arguments_and_defaults(self):
        seen = []

        @clara.tool
        def book(title: str, copies: int = 1, *, shelf: Optional[str] = None) -> dict:
            seen.append((title, copies, shelf))
            return {"title": title, "copies": copies}
        self.assertEqual(clara.call("book", title="Dune"), {"title": "Dune", "copies": 1})
        clara.call("book", title="Emma", copies=3, shelf="A")
        self.assertEqual(seen, [("Dune", 1, None), ("Emma", 3, "A")])

    def test_schema_is_enforced_before_the_function(self):
        calls = []

        @clara.tool
        def strict(n: int, mode: Literal["a", "b"] = "a") -> int:
            calls.append(n)
            return n
        for bad in ({"n": "1"}, {}, {"n": 1, "mode": "c"}, {"n": 1, "extra": True}, {"n": 1.5}):
            with self.subTest(arguments=bad):
                with self.assertRaises(clara.InvalidArgs):
                    clara.call("strict", **bad)
        self.assertEqual(calls, [])

    def test_dataclass_arguments_are_rebuilt(self):
        got = []

        @clara.tool
        def measure(seg: Segment, extra: Optional[Point] = None, more: list[Point] = [],
                    named: dict[str, Point] = {}) -> float:
            got.append((seg, extra, more, named))
            return abs(seg.end.x - seg.start.x)
        result = clara.call("measure", seg={"start": {"x": 1}, "end": {"x": 4, "y": 2, "tags": ["t"]}},
                            extra=None, more=[{"x": 2}], named={"p": {"x": 3, "label": "L"}})
        self.assertEqual(result, 3)
        seg, extra, more, named = got[0]
        self.assertEqual(seg, Segment(Point(1), Point(4, 2, None, ["t"])))
        self.assertIsNone(extra)
        self.assertEqual(more, [Point(2)])
        self.assertEqual(named, {"p": Point(3, label="L")})
        clara.call("measure", seg={"start": {"x": 0}, "end": {"x": 0}}, extra={"x": 9})
        self.assertEqual(got[1][1], Point(9))

    def test_dataclass_results(self):
        @clara.tool
        def origin() -> Point:
            return Point(0.0, 1.5, "o")
        self.assertEqual(clara.call("origin"), {"x": 0.0, "y": 1.5, "label": "o", "tags": [], "hidden": 0})

    def test_kwargs_receive_the_rest(self):
        @clara.tool
        def collect(a: int, **rest: str) -> dict:
            return {"a": a, "rest": rest}
        self.assertEqual(clara.call("collect", a=1, b="x", c="y"), {"a": 1, "rest": {"b": "x", "c": "y"}})
        with self.assertRaises(clara.InvalidArgs):
            clara.call("collect", a=1, b=2)

    def test_redecorating_replaces(self):
        @clara.tool(name="v")
        def first() -> int:
            return 1
        self.assertEqual(clara.call("v"), 1)

        @clara.tool(name="v")
        def second() -> int:
            return 2
        self.assertEqual(clara.call("v"), 2)

    def test_instance_decorator(self):
        with clara.Clara() as c:
            @c.tool
            def scoped(x: int) -> int:
                return x + 1
            self.assertEqual(clara.call("scoped", x=1), 2)
        with self.assertRaises(clara.UnknownTool):
            clara.call("scoped", x=1)


if __name__ == "__main__":
    unittest.main()
