#!/usr/bin/env python3
"""Measures what `warden mcp proxy` adds to a tools/call: the same client (the official Python
SDK) calls the hostile fixture's `echo` N times directly, then N times through the proxy, and
prints the median and 90th percentile of each and their difference (docs/benchmarks.md).

    proxy_latency.py WARDEN POLICY N

POLICY declares the fixture as server `hostile` and allows `hostile__echo`.
"""

import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

FIXTURE = str(Path(__file__).with_name("hostile_server.py"))


async def timings(params, n):
    out = []
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            for _ in range(20):  # warm up
                await session.call_tool("echo", {"text": "x"})
            for _ in range(n):
                start = time.perf_counter()
                result = await session.call_tool("echo", {"text": "x"})
                out.append(time.perf_counter() - start)
                assert not result.is_error, result
    return out


def summary(samples):
    samples = sorted(samples)
    return {
        "median_us": round(statistics.median(samples) * 1e6, 1),
        "p90_us": round(samples[int(len(samples) * 0.9)] * 1e6, 1),
    }


async def main():
    warden, policy, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    direct = await timings(StdioServerParameters(command="python3", args=[FIXTURE]), n)
    proxied = await timings(
        StdioServerParameters(
            command=warden, args=["mcp", "proxy", "--policy", policy, "--server", "hostile"]
        ),
        n,
    )
    d, p = summary(direct), summary(proxied)
    print(json.dumps({"calls": n, "direct": d, "proxied": p,
                      "added_median_us": round(p["median_us"] - d["median_us"], 1)}))


if __name__ == "__main__":
    asyncio.run(main())
