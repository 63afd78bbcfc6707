"""A loopback HTTP server replaying the recorded Flink 2.3.0 REST responses for N copies of the recorded
job (3 vertices x 2 subtasks each): the JobManager the Flink poll benchmark polls.

Run: ``python -m tests.benchmarks.flink_replay_server --jobs 1000 --port 8081`` (prints ``ready`` when
listening). Each job gets its own job id and name; its documents are the recorded ones
(tests/flink_replay.py) with the ids replaced. HTTP/1.1 keep-alive on asyncio streams (GET only; a minimal server, so the
benchmark measures the collector, not the server).
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from tests.flink_replay import load, standalone_routes

__all__ = ["build_routes", "main"]


def build_routes(jobs: int) -> dict[str, bytes]:
    """``path (or path?get) -> JSON body`` for ``jobs`` copies of the recorded job."""
    recorded = standalone_routes()
    job_doc = load("job.json")
    old_jid = job_doc["jid"]
    overview_entry = load("jobs_overview.json")["jobs"][0]
    out: dict[str, bytes] = {}
    entries: list[dict[str, Any]] = []
    for i in range(jobs):
        jid = f"{i:032x}"
        name = f"bench-job-{i:04d}"
        entries.append(dict(overview_entry, jid=jid, name=name))
        for key, doc in recorded.items():
            if key == "/jobs/overview":
                continue
            new_key = key.replace(old_jid, jid)
            if key == f"/jobs/{old_jid}":
                doc = dict(doc, jid=jid, name=name)
            out[new_key] = json.dumps(doc).encode()
    out["/jobs/overview"] = json.dumps({"jobs": entries}).encode()
    return out


async def _serve(routes: dict[str, bytes], port: int) -> None:
    not_found = json.dumps({"errors": ["Not found"]}).encode()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                target = head.split(b" ", 2)[1].decode()
                path, _, query = target.partition("?")
                key = f"{path}?get" if query.startswith("get=") else path
                body = routes.get(key)
                status = b"200 OK" if body is not None else b"404 Not Found"
                payload = body if body is not None else not_found
                writer.write(
                    b"HTTP/1.1 "
                    + status
                    + b"\r\nContent-Type: application/json\r\nContent-Length: "
                    + str(len(payload)).encode()
                    + b"\r\n\r\n"
                    + payload
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=1024)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    asyncio.run(_serve(build_routes(args.jobs), args.port))


if __name__ == "__main__":
    main()
