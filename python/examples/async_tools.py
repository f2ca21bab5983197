"""An async tool, and awaiting Clara from asyncio code."""
import asyncio

import clara


@clara.tool
async def slow_double(n: int, delay_ms: int = 10) -> int:
    """Doubles n after a pause, without holding a thread while it waits."""
    await asyncio.sleep(delay_ms / 1000)
    return 2 * n


async def main() -> None:
    # Three calls at once: each waits on a pool thread, the loop stays free.
    results = await asyncio.gather(*(clara.call_async("slow_double", n=n) for n in (1, 2, 3)))
    print(results)
    envelope = await clara.evaluate_async({"tool": "slow_double", "arguments": {"n": "x"}})
    print(envelope["status"], envelope["error"])
    try:
        await clara.call_async("slow_double")
    except clara.InvalidArgs as e:
        print(type(e).__name__, e.details)


asyncio.run(main())
