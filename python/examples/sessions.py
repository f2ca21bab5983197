"""Sessions: data scoped to one worker, ended when the work is done."""
import clara

with clara.Session("worker-1") as worker:
    worker.call("kv_set", key="progress", value=0.5)
    print("worker-1 sees", worker.call("kv_get", key="progress")["value"])
    print("worker-2 sees", clara.Session("worker-2").call("kv_get", key="progress")["found"])
    answer = worker.emit("progress.changed", {"value": 0.5})
    print("rules fired:", answer["result"]["fired"])
# Leaving the block ended the session: its data is gone.
print("after end:", clara.Session("worker-1").call("kv_get", key="progress")["found"])
