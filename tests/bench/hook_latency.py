#!/usr/bin/env python3
"""Hook latency: `warden hook claude-code|codex|gemini` from process start to answer.

Spawns the binary with one event on a real stdin pipe and waits for it to exit, as a provider
does; 20 warm-up runs, then RUNS runs per case; prints one Markdown table of median, p90 and min.
`/bin/true` and `warden --version` are the spawn and start-up floors of the same run. The cases
run against a 9-rule policy, then against a 10,000-rule one (the decide bench's mix: a quarter
each of shell, path, domain and tool-name rules over deny, ask and allow), with the compiled-
policy cache warm (its image written by the warm-up runs) and with `--no-cache` (compiled on
every call).

    python3 tests/bench/hook_latency.py target/release/warden [RUNS]
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

POLICY = """default = "ask"
allow = ["read", "bash(git status:*)", "bash(npm test:*)", "edit(src/**)", "write(src/**)"]
ask = ["bash(git push:*)"]
deny = ["bash(rm:*)", "read(**/.env)"]
"""

COMPOUND = "git status && npm test -- checkout | tee out.log"


def large_policy(n):
    """The decide bench's policy of `n` rules, plus the 9-rule policy's, as TOML."""
    lists = {"deny": [], "ask": [], "allow": []}
    for i in range(n):
        rule = [f"bash(tool{i} sub{i}:*)", f"read(/data/d{i}/**)",
                f"web_fetch(domain:*.host{i}.example)", f"mcp{i}__*"][i % 4]
        if i % 3 == 0 and i % 4 != 3:
            lists["allow"].append(rule)
        elif i % 3 == 1:
            lists["deny"].append(rule)
        else:
            lists["ask"].append(rule)
    lists["allow"] += ["read", "bash(git status:*)", "bash(npm test:*)", "edit(src/**)",
                       "write(src/**)"]
    lists["ask"] += ["bash(git push:*)"]
    lists["deny"] += ["bash(rm:*)", "read(**/.env)"]
    text = 'default = "ask"\n'
    for name, rules in lists.items():
        text += f"{name} = [\n" + "".join(f'  "{r}",\n' for r in rules) + "]\n"
    return text


def cases(cwd):
    def claude(tool, tool_input):
        return {"session_id": "s", "cwd": cwd, "hook_event_name": "PreToolUse",
                "tool_name": tool, "tool_input": tool_input, "tool_use_id": "t"}

    def codex(tool, tool_input):
        return {"session_id": "s", "turn_id": "1", "transcript_path": None, "cwd": cwd,
                "hook_event_name": "PreToolUse", "model": "m", "permission_mode": "default",
                "tool_name": tool, "tool_input": tool_input, "tool_use_id": "c"}

    def gemini(tool, tool_input):
        return {"session_id": "s", "transcript_path": "", "cwd": cwd,
                "hook_event_name": "BeforeTool", "timestamp": "2026-08-21T16:16:56.123Z",
                "tool_name": tool, "tool_input": tool_input}

    patch = "*** Begin Patch\n*** Update File: src/a.rs\n@@\n-a\n+b\n*** Add File: src/b.rs\n+x\n*** End Patch\n"
    return [
        ("claude-code", "`Read` → allow", claude("Read", {"file_path": cwd + "/src/a.rs"})),
        ("claude-code", "`Bash` compound → ask", claude("Bash", {"command": COMPOUND})),
        ("codex", "`Bash` compound → ask (exit 2)", codex("Bash", {"command": COMPOUND})),
        ("codex", "`apply_patch`, 2 files → allow", codex("apply_patch", {"command": patch})),
        ("gemini", "`read_file` → allow", gemini("read_file", {"file_path": "src/a.rs"})),
        ("gemini", "`run_shell_command` compound → ask", gemini("run_shell_command", {"command": COMPOUND})),
    ]


def timed(argv, stdin, runs):
    for _ in range(20):
        subprocess.run(argv, input=stdin, capture_output=True)
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, input=stdin, capture_output=True)
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.9)], samples[0]


def main():
    warden = os.path.abspath(sys.argv[1])
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 400
    with tempfile.TemporaryDirectory() as cwd:
        policy = os.path.join(cwd, "policy.toml")
        with open(policy, "w") as f:
            f.write(POLICY)
        large = os.path.join(cwd, "large.toml")
        with open(large, "w") as f:
            f.write(large_policy(10_000))
        rows = [("", "`/bin/true` (spawn floor)", timed(["/bin/true"], b"", runs)),
                ("", "`warden --version` (start-up floor)", timed([warden, "--version"], b"", runs))]
        for provider, label, event in cases(cwd):
            argv = [warden, "hook", provider, "--policy", policy, "--project-root", cwd]
            rows.append((provider, label, timed(argv, json.dumps(event).encode(), runs)))
        for provider, label, event in cases(cwd):
            argv = [warden, "hook", provider, "--policy", large, "--project-root", cwd]
            rows.append((provider, label + ", 10,000 rules, warm cache",
                         timed(argv, json.dumps(event).encode(), runs)))
        for provider, label, event in cases(cwd)[:2]:
            argv = [warden, "hook", provider, "--policy", large, "--project-root", cwd,
                    "--no-cache"]
            rows.append((provider, label + ", 10,000 rules, `--no-cache`",
                         timed(argv, json.dumps(event).encode(), max(runs // 4, 20))))
    print("| hook | case | median | p90 | min |")
    print("|---|---|---|---|---|")
    for provider, label, (median, p90, low) in rows:
        print(f"| {provider or '—'} | {label} | {median:.2f} ms | {p90:.2f} ms | {low:.2f} ms |")


if __name__ == "__main__":
    main()
