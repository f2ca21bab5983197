"""The first call: a built-in tool, its result, and an error as an exception."""
import clara

print(clara.call("echo", message="hello"))
try:
    clara.call("nonexistent")
except clara.UnknownTool as e:
    print(e.code, "-", e.message)
