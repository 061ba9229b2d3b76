#!/usr/bin/env python3
"""MCP bridge: tool-call overhead vs a direct SDK ``ClientSession.call_tool``, and install → tools published.

    .venv/bin/python scripts/bench/bench_mcp_bridge.py [--calls 200] [--rounds 5]

Goals (issue 11):
- a tool call through the bridge (``ToolRegistry.execute`` of ``everything.echo``: JSON Schema validation, the
  host's ``call_tool``, result mapping and size check) costs ≤ 1.2× a direct ``ClientSession.call_tool`` on the
  same server (``@modelcontextprotocol/server-everything``, one process each), in the same run, alternating
  batches of 10 calls;
- install → tools published < 1.5 s for server-everything (node start included), measured over real stdio:
  ``plugins/install`` of a development package to the answer carrying ``status: ready`` and the tool list.

Figures are the best and the median of the rounds (on a shared machine the best round is the least disturbed).
Needs scripts/setup step h (tools/mcp-ref).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import anyio  # noqa: E402

EVERYTHING = ROOT / "tools" / "mcp-ref" / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist"


def manifest(plugin_id: str) -> dict[str, Any]:
    return {
        "id": plugin_id,
        "name": "Everything",
        "version": "1.0.0",
        "backend": {
            "type": "mcp",
            "transport": "stdio",
            "command": "node",
            "args": [str(EVERYTHING / "index.js"), "stdio"],
        },
    }


async def overhead(calls: int, rounds: int) -> tuple[list[float], list[float]]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    from sidecar.agent.tools import ToolContext, ToolRegistry
    from sidecar.ir import MetonaToolCall
    from sidecar.mcp_host.host import HostSpec
    from sidecar.mcp_host.service import McpBridge
    from sidecar.plugins.package import parse_manifest
    from sidecar.workers.supervisor import ChildSupervisor

    registry = ToolRegistry()
    bridged: list[float] = []
    direct: list[float] = []
    params = StdioServerParameters(command="node", args=[str(EVERYTHING / "index.js"), "stdio"])
    async with anyio.create_task_group() as tg:
        bridge = McpBridge(registry, ChildSupervisor(), tg)
        spec = HostSpec("everything", parse_manifest(manifest("everything")), EVERYTHING)
        status = await bridge.start(spec)
        assert status.status == "ready", status
        ctx = ToolContext(run_id="bench", session_id="bench", tool_call_id="c")
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await session.list_tools()
            for _ in range(20):  # warm both
                await session.call_tool("echo", {"message": "warm"})
                await registry.execute(_call(MetonaToolCall, "w"), ctx)
            for _ in range(rounds):  # alternate in batches of 10 calls: noise on a shared machine hits both
                spent_bridged = spent_direct = 0.0
                for batch in range(0, calls, 10):
                    started = time.perf_counter()
                    for i in range(batch, batch + 10):
                        out = await registry.execute(_call(MetonaToolCall, str(i)), ctx)
                        assert out.result.success, out.result
                    middle = time.perf_counter()
                    for i in range(batch, batch + 10):
                        result = await session.call_tool("echo", {"message": f"hello {i}"})
                        assert not result.is_error
                    spent_bridged += middle - started
                    spent_direct += time.perf_counter() - middle
                bridged.append(spent_bridged / calls * 1000)
                direct.append(spent_direct / calls * 1000)
        await bridge.shutdown()
        tg.cancel_scope.cancel()
    return bridged, direct


def _call(cls: Any, i: str) -> Any:
    return cls(id=f"c{i}", name="everything.echo", args={"message": f"hello {i}"}, iteration=1, timestamp=1)


def install_times(rounds: int) -> list[float]:
    from tests.support.sidecar_proc import Sidecar

    times: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        data.mkdir()
        sc = Sidecar(data, args=["--development"])
        try:
            sc.initialize()
            for n in range(rounds):
                folder = Path(tmp) / f"pkg{n}"
                folder.mkdir()
                (folder / "plugin.json").write_text(json.dumps(manifest(f"everything-{n}")))
                started = time.perf_counter()
                info = sc.result("plugins/install", {"package_path": str(folder)}, timeout=30)
                times.append(time.perf_counter() - started)
                assert info["host"]["status"] == "ready" and info["host"]["tools_count"] > 5, info
                sc.result("plugins/uninstall", {"plugin_id": f"everything-{n}"})
        finally:
            sc.close()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    ns = parser.parse_args()
    if not (EVERYTHING / "index.js").exists():
        raise SystemExit("tools/mcp-ref is not installed: run scripts/setup")
    bridged, direct = anyio.run(overhead, ns.calls, ns.rounds)
    ratio_best = min(bridged) / min(direct)
    ratio_median = statistics.median(bridged) / statistics.median(direct)
    print(f"tool call (server-everything echo), {ns.calls} calls x {ns.rounds} rounds, ms per call:")
    print(f"  direct ClientSession.call_tool: best {min(direct):.3f}  median {statistics.median(direct):.3f}")
    print(f"  through the bridge (registry):  best {min(bridged):.3f}  median {statistics.median(bridged):.3f}")
    print(f"  ratio: best {ratio_best:.2f}x  median {ratio_median:.2f}x  (goal <= 1.2x)")
    times = install_times(ns.rounds)
    print(f"install -> tools published (server-everything, node start included), {ns.rounds} installs:")
    print(f"  best {min(times):.3f} s  median {statistics.median(times):.3f} s  (goal < 1.5 s)")


if __name__ == "__main__":
    main()
