"""The loopback judge API's batch endpoints (tests.judge_server): OpenAI's Batch API and
Anthropic's Message Batches, enough for the official SDKs.

OpenAI: POST /v1/files (multipart, purpose "batch"), GET /v1/files/{id}/content,
POST /v1/batches, GET /v1/batches/{id}, POST /v1/batches/{id}/cancel, GET /v1/batches.
Anthropic: POST /v1/messages/batches, GET /v1/messages/batches/{id}, POST
/v1/messages/batches/{id}/cancel, GET /v1/messages/batches/{id}/results, GET
/v1/messages/batches.

Each request of a batch takes the next scripted Behaviour of the server (server.script /
server.default), as a live call would: "ok" (and cut_off, malformed, refusal, no_usage)
replies as the live endpoint does (same usage); "status" makes the request errored with that
HTTP status. The batch itself follows the next BatchPlan (server.plan_batches; default
BatchPlan()): `polls` looks (retrievals or listings) answered "in progress" first, then
ended; with
`expire_after=k` only its first k requests ran and the rest expired (OpenAI: batch status
"expired", error-file lines with code "batch_expired"; Anthropic: results of type
"expired"). Every request line is kept in server.batch_lines (custom_id, body).
"""

from __future__ import annotations

import itertools
import json
import time
from dataclasses import dataclass
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any

_IDS = itertools.count(1)


@dataclass(frozen=True)
class BatchPlan:
    """How one submitted batch behaves: `polls` retrievals "in progress" before it ends;
    `expire_after` (None: all ran) requests ran before the rest expired; once cancelled
    (before it ended), it ends at the next look with its first `ran_before_cancel`
    requests run and the rest cancelled (OpenAI: status "cancelled", error lines with code
    "batch_cancelled"; Anthropic: results of type "canceled"). `fail` (OpenAI only): the
    batch fails its validation, as OpenAI fails a batch whose input file is bad: status
    "failed", no request run, no output or error file, and `errors.data` carrying the
    vendor's reason (code "invalid_request", this message)."""

    polls: int = 0
    expire_after: int | None = None
    ran_before_cancel: int = 0
    fail: str = ""


@dataclass
class _Batch:
    vendor: str
    batch_id: str
    created: float
    lines: list[dict[str, Any]]
    outcomes: list[tuple[str, int, dict[str, Any]]]  # (custom_id, HTTP status, payload)
    plan: BatchPlan
    polls_left: int
    metadata: dict[str, Any]
    input_file_id: str = ""
    output_file_id: str | None = None
    error_file_id: str | None = None
    cancelled: bool = False

    @property
    def ended(self) -> bool:
        return self.polls_left <= 0


class BatchEndpoints:
    """The batch state of one JudgeServer; `respond` answers a batch or file request."""

    def __init__(self, server: Any) -> None:
        self.server = server
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, _Batch] = {}

    @staticmethod
    def handles(path: str) -> bool:
        """True for the paths answered here."""
        return "/batches" in path or path.endswith("/files") or "/files/" in path

    def respond(
        self, method: str, path: str, headers: dict[str, str], raw: bytes
    ) -> tuple[int, Any, dict[str, str]]:
        """Return (status, JSON payload or raw bytes, extra headers) for one request."""
        parts = [p for p in path.split("/") if p]
        with self.server._lock:
            if parts[:2] == ["v1", "files"]:
                return self._files(method, parts[2:], headers, raw)
            if parts[:3] == ["v1", "messages", "batches"]:
                return self._anthropic(method, parts[3:], raw)
            if parts[:2] == ["v1", "batches"]:
                return self._openai(method, parts[2:], raw)
        return 404, {"error": {"type": "not_found", "message": path}}, {}

    # -- OpenAI ---------------------------------------------------------------------------

    def _files(self, method: str, rest: list[str], headers: dict[str, str], raw: bytes) -> tuple:
        if method == "POST" and not rest:
            form = BytesParser(policy=HTTP).parsebytes(
                b"Content-Type: " + headers.get("content-type", "").encode() + b"\r\n\r\n" + raw
            )
            data = b""
            for part in form.iter_parts():
                if part.get_param("name", header="content-disposition") == "file":
                    data = part.get_payload(decode=True) or b""
            file_id = f"file-{next(_IDS)}"
            self.files[file_id] = data
            return 200, _file(file_id, data, "batch"), {}
        if method == "GET" and len(rest) == 2 and rest[1] == "content" and rest[0] in self.files:
            return 200, self.files[rest[0]], {}
        return 404, {"error": {"message": f"no file {rest}", "type": "invalid_request_error"}}, {}

    def _openai(self, method: str, rest: list[str], raw: bytes) -> tuple:
        if method == "POST" and not rest:
            body = json.loads(raw or b"{}")
            data = self.files.get(body.get("input_file_id", ""))
            if data is None:
                return 400, {"error": {"message": "no such input file", "type": "invalid"}}, {}
            lines = [json.loads(x) for x in data.decode().splitlines() if x.strip()]
            batch = self._create("openai", f"batch_{next(_IDS)}", lines, body.get("metadata"))
            batch.input_file_id = body["input_file_id"]
            return 200, self._openai_batch(batch), {}
        if method == "GET" and not rest:
            listed = [self._openai_batch(b) for b in self._newest("openai")]
            return 200, _page(listed), {}
        batch = self.batches.get(rest[0]) if rest else None
        if method == "POST" and batch is not None and rest[1:] == ["cancel"]:
            return self._cancel(batch, self._openai_batch)
        batch = batch if len(rest) == 1 else None
        if method == "GET" and batch is not None:
            batch.polls_left -= 1
            return 200, self._openai_batch(batch), {}
        return 404, {"error": {"message": f"no batch {rest}", "type": "invalid_request_error"}}, {}

    def _openai_batch(self, b: _Batch) -> dict[str, Any]:
        if b.plan.fail:
            return self._openai_failed(b)
        ran = self._ran(b)
        expired = b.ended and len(ran) < len(b.outcomes)
        if b.ended and b.output_file_id is None:
            out, err = [], []
            for i, (cid, code, payload) in enumerate(b.outcomes):
                if i >= len(ran):
                    code_, why = (
                        ("batch_cancelled", "the batch was cancelled before it ran")
                        if b.cancelled
                        else ("batch_expired", "not run before the window closed")
                    )
                    err.append(
                        {
                            "id": f"batch_req_{i}",
                            "custom_id": cid,
                            "response": None,
                            "error": {"code": code_, "message": why},
                        }
                    )
                elif code == 200:
                    out.append(
                        {
                            "id": f"batch_req_{i}",
                            "custom_id": cid,
                            "error": None,
                            "response": {"status_code": 200, "body": payload},
                        }
                    )
                else:
                    err.append(
                        {
                            "id": f"batch_req_{i}",
                            "custom_id": cid,
                            "error": None,
                            "response": {"status_code": code, "body": payload},
                        }
                    )
            b.output_file_id = self._store(out)
            b.error_file_id = self._store(err)
        failed = sum(1 for _, code, _ in ran if code != 200)
        if b.cancelled:
            status = "cancelled" if b.ended else "cancelling"
            expired = False
        else:
            status = "in_progress" if not b.ended else ("expired" if expired else "completed")
        return {
            "id": b.batch_id, "object": "batch", "endpoint": "/v1/chat/completions",
            "errors": None, "input_file_id": b.input_file_id, "completion_window": "24h",
            "status": status, "output_file_id": b.output_file_id if b.ended else None,
            "error_file_id": b.error_file_id if b.ended else None, "created_at": int(b.created),
            "in_progress_at": int(b.created), "expires_at": int(b.created) + 86400,
            "finalizing_at": None, "completed_at": int(time.time()) if b.ended else None,
            "failed_at": None, "expired_at": int(time.time()) if expired else None,
            "cancelling_at": int(b.created) if b.cancelled else None,
            "cancelled_at": int(time.time()) if b.cancelled and b.ended else None,
            "request_counts": {"total": len(b.outcomes),
                               "completed": len(ran) - failed if b.ended else 0,
                               "failed": (len(b.outcomes) - len(ran) + failed) if b.ended else 0},
            "metadata": b.metadata,
        }  # fmt: skip

    def _openai_failed(self, b: _Batch) -> dict[str, Any]:
        """An OpenAI batch that failed its validation (BatchPlan.fail): no request ran."""
        return {
            "id": b.batch_id, "object": "batch", "endpoint": "/v1/chat/completions",
            "errors": {"object": "list", "data": [
                {"code": "invalid_request", "message": b.plan.fail, "line": 1, "param": None}
            ]},
            "input_file_id": b.input_file_id, "completion_window": "24h",
            "status": "failed" if b.ended else "validating", "output_file_id": None,
            "error_file_id": None, "created_at": int(b.created), "in_progress_at": None,
            "expires_at": int(b.created) + 86400, "finalizing_at": None, "completed_at": None,
            "failed_at": int(time.time()) if b.ended else None, "expired_at": None,
            "cancelling_at": None, "cancelled_at": None,
            "request_counts": {"total": len(b.outcomes), "completed": 0, "failed": 0},
            "metadata": b.metadata,
        }  # fmt: skip

    def _store(self, rows: list[dict[str, Any]]) -> str | None:
        if not rows:
            return None
        file_id = f"file-{next(_IDS)}"
        self.files[file_id] = "".join(json.dumps(r) + "\n" for r in rows).encode()
        return file_id

    # -- Anthropic ------------------------------------------------------------------------

    def _anthropic(self, method: str, rest: list[str], raw: bytes) -> tuple:
        if method == "POST" and not rest:
            lines = json.loads(raw or b"{}").get("requests") or []
            batch = self._create("anthropic", f"msgbatch_{next(_IDS)}", lines, None)
            return 200, self._anthropic_batch(batch), {}
        if method == "GET" and not rest:
            listed = [self._anthropic_batch(b) for b in self._newest("anthropic")]
            return 200, _page(listed), {}
        batch = self.batches.get(rest[0]) if rest else None
        if method == "POST" and batch is not None and rest[1:] == ["cancel"]:
            return self._cancel(batch, self._anthropic_batch)
        if method == "GET" and batch is not None and len(rest) == 1:
            batch.polls_left -= 1
            return 200, self._anthropic_batch(batch), {}
        if method == "GET" and batch is not None and rest[1:] == ["results"] and batch.ended:
            rows = []
            ran = self._ran(batch)
            for i, (cid, code, payload) in enumerate(batch.outcomes):
                if i >= len(ran):
                    result: dict[str, Any] = {"type": "canceled" if batch.cancelled else "expired"}
                elif code == 200:
                    result = {"type": "succeeded", "message": payload}
                else:
                    result = {"type": "errored", "error": payload}
                rows.append({"custom_id": cid, "result": result})
            return 200, "".join(json.dumps(r) + "\n" for r in rows).encode(), {}
        return 404, {"type": "error", "error": {"type": "not_found_error", "message": "no"}}, {}

    def _anthropic_batch(self, b: _Batch) -> dict[str, Any]:
        ran = self._ran(b)
        ok = sum(1 for _, code, _ in ran if code == 200)
        counts = {
            "processing": 0 if b.ended else len(b.outcomes),
            "succeeded": ok if b.ended else 0,
            "errored": len(ran) - ok if b.ended else 0,
            "canceled": len(b.outcomes) - len(ran) if b.ended and b.cancelled else 0,
            "expired": len(b.outcomes) - len(ran) if b.ended and not b.cancelled else 0,
        }
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(b.created))
        return {
            "id": b.batch_id,
            "type": "message_batch",
            "processing_status": (
                "ended" if b.ended else "canceling" if b.cancelled else "in_progress"
            ),
            "request_counts": counts,
            "created_at": stamp,
            "expires_at": stamp,
            "ended_at": stamp if b.ended else None,
            "archived_at": None,
            "cancel_initiated_at": stamp if b.cancelled else None,
            "results_url": (
                f"{self.server.url}/v1/messages/batches/{b.batch_id}/results" if b.ended else None
            ),
        }

    # -- shared ---------------------------------------------------------------------------

    def _create(
        self, vendor: str, batch_id: str, lines: list[dict[str, Any]], metadata: Any
    ) -> _Batch:
        """Run each request through the next scripted behaviour, as a live call would."""
        from tests.judge_server import _error_body, _reply_body

        plan = self.server._batch_plans.popleft() if self.server._batch_plans else BatchPlan()
        outcomes = []
        for line in lines:
            body = line.get("body") if vendor == "openai" else line.get("params")
            self.server.batch_lines.append({"custom_id": line.get("custom_id"), "body": body})
            b = self.server._queue.popleft() if self.server._queue else self.server.default
            if b.kind == "status":
                outcomes.append((line.get("custom_id"), b.status_code, _error_body(vendor, b)))
            else:
                # The vendors cache within a batch too: lines are answered one after another
                # here, each reading the prefixes of the lines before it.
                cached = self.server.prefix_cache.lookup(vendor, body or {})
                self.server.prefix_cache.remember(cached)
                outcomes.append(
                    (line.get("custom_id"), 200, _reply_body(vendor, body or {}, b, cached))
                )
        batch = _Batch(
            vendor, batch_id, time.time(), lines, outcomes, plan, plan.polls + 1, metadata or {}
        )
        self.batches[batch_id] = batch
        return batch

    def _cancel(self, b: _Batch, shape: Any) -> tuple:
        """Cancel a batch that has not ended: it answers "cancelling" now and ends at the next
        look with its first `plan.ran_before_cancel` requests run. An ended batch is refused
        (409), as both vendors refuse it."""
        if b.ended:
            return (
                409,
                {"error": {"message": "batch has ended", "type": "invalid_request_error"}},
                {},
            )
        b.cancelled = True
        b.polls_left = 1
        return 200, shape(b), {}

    @staticmethod
    def _ran(b: _Batch) -> list[tuple[str, int, dict[str, Any]]]:
        cut = len(b.outcomes) if b.plan.expire_after is None else b.plan.expire_after
        if b.cancelled:
            cut = min(cut, b.plan.ran_before_cancel)
        return b.outcomes[:cut]

    def _newest(self, vendor: str) -> list[_Batch]:
        """The vendor's batches, newest first; a listing counts as a look at each (a batch
        planned to stay in progress for N looks ends after N retrievals or listings)."""
        for b in self.batches.values():
            if b.vendor == vendor:
                b.polls_left -= 1
        return sorted(
            (b for b in self.batches.values() if b.vendor == vendor),
            key=lambda b: b.created,
            reverse=True,
        )


def _file(file_id: str, data: bytes, purpose: str) -> dict[str, Any]:
    return {
        "id": file_id,
        "object": "file",
        "bytes": len(data),
        "created_at": int(time.time()),
        "filename": f"{file_id}.jsonl",
        "purpose": purpose,
        "status": "processed",
    }


def _page(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "object": "list",
        "data": rows,
        "first_id": rows[0]["id"] if rows else None,
        "last_id": rows[-1]["id"] if rows else None,
        "has_more": False,
    }
