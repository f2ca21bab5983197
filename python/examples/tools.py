"""Tools written in Python: the schema comes from the type hints."""
from dataclasses import dataclass
from typing import Literal, Optional

import clara


@dataclass
class Room:
    width: float
    depth: float
    name: str = "room"


@clara.tool(limits={"timeout_ms": 2000})
def floor_area(rooms: list[Room], unit: Literal["m2", "ft2"] = "m2", round_to: Optional[int] = None) -> dict[str, float]:
    """The floor area of a list of rooms."""
    total = sum(r.width * r.depth for r in rooms)
    if unit == "ft2":
        total *= 10.7639
    return {"total": total if round_to is None else round(total, round_to)}


@clara.tool
def divide(a: float, b: float) -> float:
    """a / b."""
    return a / b


print(floor_area.__name__, "is still a plain function:", floor_area([Room(2, 3)]))
print(clara.call("floor_area", rooms=[{"width": 3, "depth": 4}, {"width": 2, "depth": 2.5, "name": "hall"}]))
print(clara.call("floor_area", rooms=[{"width": 3, "depth": 4}], unit="ft2", round_to=1))

try:
    clara.call("floor_area", rooms=[{"width": "wide"}], unit="acres")
except clara.InvalidArgs as e:
    for problem in e.details:
        print("invalid:", problem["pointer"], problem["message"])

try:
    clara.call("divide", a=1, b=0)
except clara.ToolFailed as e:
    print("failed:", e.message)

schema = next(t for t in clara.tools() if t["name"] == "divide")["input_schema"]
print(schema)
