#!/usr/bin/env python3
"""Drives an MCP server over stdio with the official Python SDK (`mcp` from PyPI) and prints
what it saw as one JSON object: the tools listed, and the result of each call given.

    python_client.py CALLS_JSON -- COMMAND ARG...

CALLS_JSON is a list of [tool, arguments] pairs. Used by Warden's tests to hold
`warden mcp proxy` to a real client other than Warden's own.
"""

import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def main():
    calls = json.loads(sys.argv[1])
    split = sys.argv.index("--")
    command, args = sys.argv[split + 1], sys.argv[split + 2 :]
    params = StdioServerParameters(command=command, args=args)
    out = {"tools": [], "calls": []}
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            listed = await session.list_tools()
            out["tools"] = sorted(t.name for t in listed.tools)
            for name, arguments in calls:
                result = await session.call_tool(name, arguments)
                texts = [c.text for c in result.content if getattr(c, "text", None) is not None]
                out["calls"].append({"tool": name, "is_error": bool(result.is_error), "text": "\n".join(texts)})
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main())
