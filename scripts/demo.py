#!/usr/bin/env python3
"""A session with the sidecar on its embedded defaults (no network, no API key, no model download).

    .venv/bin/python scripts/demo.py [--data-dir DIR] [--binary dist/metona-sidecar]

It spawns the sidecar the way the Electron app does and drives the main jobs over stdio: the scripted
``mock`` provider answers a streamed chat, a memory is superseded by a correction, Chinese and English notes are
indexed by the embedded USE model and found again by full-text, vector and hybrid search, and an agent run
searches those notes, calculates, asks permission to write a file in a workspace folder and answers. Each request and a
short form of its answer are printed; the sidecar's own stdout carries only protocol lines (its logs go to
its stderr, which this script discards unless --verbose).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


class Client:
    def __init__(self, cmd: list[str], env: dict[str, str], verbose: bool) -> None:
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None if verbose else subprocess.DEVNULL,
            env=env,
        )
        self.ids = itertools.count(1)

    def call(self, method: str, params: Any = None, *, show: bool = True) -> Any:
        rid = next(self.ids)
        line = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            line["params"] = params
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps(line, ensure_ascii=False).encode() + b"\n")
        self.proc.stdin.flush()
        stream: list[dict[str, Any]] = []
        while True:
            raw = self.proc.stdout.readline()
            if not raw:
                raise SystemExit(f"the sidecar exited during {method}")
            msg = json.loads(raw)
            if msg.get("id") == rid:
                break
            if "jsonrpc" not in msg:
                stream.append(msg)
            elif show:
                print(f"   <- notification {msg.get('method')}")
        if show:
            print(f"-> {method}")
            if stream:
                kinds = [m["type"] for m in stream]
                print(f"   <- {len(stream)} stream lines: {' '.join(kinds[:6])}{' …' if len(kinds) > 6 else ''}")
        if "error" in msg:
            raise SystemExit(f"{method} failed: {json.dumps(msg['error'], ensure_ascii=False)}")
        return msg["result"]

    def close(self) -> int:
        self.call("shutdown", show=False)
        assert self.proc.stdin
        self.proc.stdin.write(b'{"jsonrpc":"2.0","method":"exit"}\n')
        self.proc.stdin.close()
        return self.proc.wait(30)


def ir_request(text: str) -> dict[str, Any]:
    return {
        "meta": {"sessionId": "demo", "iteration": 1, "requestId": "demo-1", "timestamp": 0, "agentVersion": "demo"},
        "systemPrompt": {"roleDefinition": "You are Metona.", "outputConstraints": "", "safetyGuidelines": ""},
        "messages": [{"role": "user", "content": text, "timestamp": 0}],
        "params": {"stream": True},
    }


def show(label: str, value: Any) -> None:
    print(f"   {label}: {json.dumps(value, ensure_ascii=False)}")


def agent_run(client: Client, workspace: Path) -> None:
    """A ReAct run on a scripted model: two tools in one turn, a permission, the answer; then its trace."""
    workspace.mkdir(parents=True, exist_ok=True)
    client.call("config/update", {"values": {"agent.workspaceRoots": [str(workspace)]}})
    turns = [
        {
            "tool_calls": [
                {"id": "t1", "name": "knowledge_search", "args": {"query": "服务器为什么宕机", "top_k": 1}},
                {"id": "t2", "name": "calculator", "args": {"expression": "7 * 24"}},
            ]
        },
        {
            "tool_calls": [
                {"id": "t3", "name": "write_file", "args": {"path": "incident.md", "content": "磁盘被日志占满"}}
            ]
        },
        {"text": "宕机原因：磁盘被日志占满（见《运维周报》）。一周 168 小时；已写入 incident.md。", "chunk_chars": 6},
    ]
    client.call(
        "providers/create", {"provider_id": "agent-mock", "preset": "mock", "options": {"script": {"turns": turns}}}
    )
    request = ir_request("服务器为什么宕机？记下来。")
    run = client.call("agent/runs/create", {"provider_id": "agent-mock", "request": request})
    run_id = run["run_id"]
    show("agent/runs/create", {"run_id": run_id[:12] + "…", "status": run["status"]})
    asked = _wait_event(client, run_id, "PermissionRequired")
    show("PermissionRequired", {k: asked[k] for k in ("tool_name", "permission", "risk_level")})
    client.call(
        "agent/permissions/resolve", {"run_id": run_id, "request_id": asked["request_id"], "decision": "allow_once"}
    )
    _wait_event(client, run_id, "RunCompleted")
    done = client.call("agent/runs/get", {"run_id": run_id})
    show("output", done["output"])
    show("summary", done["summary"])
    show("incident.md", (workspace / "incident.md").read_text(encoding="utf-8"))
    trace = client.call("agent/runs/trace", {"run_id": run_id, "limit": 1000})
    show("trace", [e["event"] for e in trace["items"] if e["event"] not in ("TextDelta", "Usage")])


def _wait_event(client: Client, run_id: str, name: str, timeout_s: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        page = client.call("agent/runs/events", {"run_id": run_id, "limit": 1000}, show=False)
        for item in page["items"]:
            if item["event"] == name:
                return item["data"]
        time.sleep(0.05)
    raise SystemExit(f"no {name} within {timeout_s} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, help="keep the data here (default: a temporary directory)")
    parser.add_argument("--binary", type=Path, help="run this one-file binary instead of the venv's sidecar")
    parser.add_argument("--verbose", action="store_true", help="show the sidecar's logs (stderr)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = args.data_dir or Path(tmp) / "data"
        env = dict(os.environ, METONA_DATA_DIR=str(data_dir))
        env.setdefault("METONA_SECRET_KEY_FILE", str(Path(tmp) / "master.key"))
        cmd = [str(args.binary)] if args.binary else [sys.executable, "-m", "sidecar"]
        client = Client(cmd, env, args.verbose)
        init = client.call("initialize", {"client_info": {"name": "demo"}})
        show("server", init["server_info"])

        script = {"turns": [{"reasoning": "The user greets me.", "text": "你好！我是 Metona。How can I help?"}]}
        client.call("providers/create", {"preset": "mock", "options": {"script": script}})
        answer = client.call("chat/stream", {"provider_id": "mock", "request": ir_request("你好")})
        show("content", answer["content"])
        show("reasoningContent", answer["reasoningContent"])

        client.call("memory/add", {"content": "我住在北京", "type": "semantic", "importance": 0.7})
        added = client.call("memory/add", {"content": "更正：我现在住在上海", "type": "semantic", "importance": 0.7})
        show("superseded", added["superseded"])
        found = client.call("memory/search", {"query": "我住在哪里？", "top_k": 3})
        show("memory/search", [r["item"]["content"] for r in found["items"]])

        client.call(
            "notes/create",
            {
                "title": "运维周报",
                "content": "# 事故\n\n服务器宕机的原因是磁盘被日志占满。\n\n# 计划\n\n下周评审会在周三下午开。",
            },
        )
        client.call(
            "notes/create",
            {"title": "Database plan", "content": "We are switching the billing database from MySQL to PostgreSQL."},
        )
        for query, mode in (("服务器为什么宕机", "fts"), ("评审会什么时候开", "vector"), ("Which database?", "hybrid")):
            hits = client.call("search/query", {"query": query, "mode": mode, "top_k": 1})["items"]
            show(f"search/query {mode} {query!r}", hits[0]["text"] if hits else None)
        status = client.call("index/status", {})
        show("index/status", {"status": status["status"], "embedding": status["embedding"]["model_id"]})

        agent_run(client, Path(tmp) / "workspace")
        code = client.close()
        print(f"sidecar exited with {code}")
        return code


if __name__ == "__main__":
    raise SystemExit(main())
