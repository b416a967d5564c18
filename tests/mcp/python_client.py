#!/usr/bin/env python3
"""Drives an MCP server over stdio with the official Python SDK (`mcp` from PyPI) and prints
what it saw as one JSON object: the tools listed, the result of each call given, and every
question the server asked through elicitation.

    python_client.py [--approve yes|no] CALLS_JSON -- COMMAND ARG...

CALLS_JSON is a list of [tool, arguments] pairs. With --approve the client declares
elicitation and answers every question with that (yes: accept with `approve: true`; no:
decline); without it the client cannot be asked. Used by Warden's tests to hold
`warden mcp proxy` to a real client other than Warden's own.
"""

import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client


async def main():
    argv = sys.argv[1:]
    approve = None
    if argv[0] == "--approve":
        approve, argv = argv[1], argv[2:]
    calls = json.loads(argv[0])
    split = argv.index("--")
    command, args = argv[split + 1], argv[split + 2 :]
    params = StdioServerParameters(command=command, args=args)
    out = {"tools": [], "calls": [], "questions": []}

    async def answer(context, question):
        out["questions"].append(question.message)
        if approve == "yes":
            return types.ElicitResult(action="accept", content={"approve": True})
        return types.ElicitResult(action="decline")

    asking = {"elicitation_callback": answer} if approve is not None else {}
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, **asking) as session:
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
