"""The vendors' batch APIs for judge calls: OpenAI Batch API and Anthropic Message Batches.

Pure (no Django). A `BatchAPI` wraps a live backend (judges.llm) and uses ITS
request builder (OpenAIBackend._body, AnthropicBackend._request) for every request line, its
reply reader (`_completion`) and its parser (ChatBackend.grade_result), so a batched call
sends and reads exactly what the live call would; only the transport differs. Calls go
through the official SDKs with the backend's own client (key read from the environment at
each call, retries off: the poller simply asks again at its next poll).

- OpenAI: the request lines are uploaded as a JSONL file (`client.files.create`, purpose
  "batch"), then `client.batches.create(endpoint="/v1/chat/completions",
  completion_window="24h", metadata={"snaglist_tag": tag})`; `client.batches.retrieve`;
  results from the output and error files (`client.files.content`).
- Anthropic: `client.messages.batches.create(requests=[{custom_id, params}])`,
  `.retrieve`, `.results` (the JSONL at results_url), `.list`.

Each request's custom_id is `custom_id(tag, response, judge, key entry, prompt version)`:
the batch's tag first, so a batch can be recognised at the vendor by its requests alone
(Anthropic batches carry no metadata; see `find`).
SDK errors are raised as JudgeUnavailable (transient: 429, 5xx, timeouts) or
JudgeConfigError (the vendor refused the request), with the key redacted.
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .llm import AnthropicBackend, ChatBackend, Completion, OpenAIBackend
from .types import GradingInput, JudgeConfigError, JudgeUnavailable

# A vendor batch older than this before its JudgeBatch row was written cannot be that row's
# (the row is written, then the batch created): `find` looks no further back, in seconds.
CLOCK_SKEW_SECONDS = 300
# `find` reads at most this many of the vendor's most recent batches.
FIND_LIMIT = 200
# What a result can be: the vendor answered, refused the request, or never ran it.
RESULT_KINDS = ("succeeded", "errored", "expired", "canceled")
_CUSTOM_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def custom_id(tag: str, response_id: int, judge_id: int, key_entry_id: int, version: str) -> str:
    """Return the request id of one grade pair in a batch: "<tag>-r<response>-j<judge>-
    e<key entry>-v<prompt version>", the version reduced to letters, digits and "_" (both
    vendors allow [A-Za-z0-9_-], at most 64 characters; the version is cut to fit). The
    batch row keeps the exact pair of each id; the id is for reading a vendor's file.
    Raises ValueError when even the pair without its version does not fit."""
    head = f"{tag}-r{response_id}-j{judge_id}-e{key_entry_id}-v"
    room = 64 - len(head)
    if room < 1 or not _CUSTOM_ID.match(head):
        raise ValueError(f"custom id {head!r} is not a valid batch request id")
    return head + (re.sub(r"[^A-Za-z0-9_]", "_", version) or "_")[:room]


@dataclass(frozen=True)
class BatchState:
    """A vendor batch as last seen: its id, whether it has ended (results can be read),
    the vendor's status word, the vendor's request counts ({name: n}), and error: the
    vendor's reason for failing the whole batch ("" when it gave none: OpenAI's
    `errors.data` messages, "code: message" joined by "; ")."""

    batch_id: str
    ended: bool
    vendor_status: str
    counts: dict[str, int] = field(default_factory=dict)
    error: str = ""


@dataclass(frozen=True)
class BatchResult:
    """One request's outcome in an ended batch: kind (RESULT_KINDS), the reply for
    "succeeded" (a Completion with its usage), else error (the vendor's reason)."""

    custom_id: str
    kind: str
    completion: Completion | None = None
    error: str = ""


class BatchAPI(ABC):
    """One judge's batch API over its live backend (see the module docstring)."""

    vendor: str = ""
    CANCELLABLE: frozenset[str] = frozenset()  # vendor statuses a cancel can still stop

    def __init__(self, backend: ChatBackend) -> None:
        self.backend = backend

    def prompt(self, inp: GradingInput) -> str:
        """Return the judge prompt of one pair: the live path's (ChatBackend.judge_prompt: the
        judge's own template, with the prefix a question's responses share marked for the
        vendor's prompt cache by the request builders)."""
        return self.backend.judge_prompt(inp)

    def grade(self, result: BatchResult, scale: list[int]) -> Any:
        """Return the GradeResult of a succeeded result: the live path's parse
        (ChatBackend.grade_result); ValueError for a result that did not succeed."""
        if result.completion is None:
            raise ValueError(f"batch result {result.custom_id} is {result.kind}: no reply")
        return self.backend.grade_result(result.completion, scale)

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Call an SDK function; raise its errors as JudgeUnavailable / JudgeConfigError (a
        3xx reply too: not followed), and a connection the EndpointPolicy refused at connect
        time as its EndpointRefused (judges.egress)."""
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - classified below, the rest re-raised
            from .egress import refusal_in

            refused = refusal_in(exc)  # a connection refused by the policy: not retried
            if refused is not None:
                raise refused from None
            failure = self.backend._classify(exc)
            if failure is None:
                raise
            error = JudgeUnavailable if failure.transient else JudgeConfigError
            raise error(f"batch API: {failure.message}") from None

    def client(self) -> Any:
        """Return the SDK client (the backend's, with the key from the environment)."""
        return self.backend._client(self.backend._api_key())

    @abstractmethod
    def request(self, cid: str, inp: GradingInput) -> dict[str, Any]:
        """Return the batch request of one pair (JSON-able) under custom id `cid`."""

    @abstractmethod
    def submit(self, requests: list[dict[str, Any]], tag: str) -> BatchState:
        """Create the batch of `requests` at the vendor; return its state."""

    @abstractmethod
    def retrieve(self, batch_id: str) -> BatchState:
        """Return the batch's state at the vendor."""

    @abstractmethod
    def cancel(self, batch_id: str) -> BatchState:
        """Ask the vendor to stop the batch; return its state (not ended yet as a rule: the
        vendor ends it shortly after, with the requests it had run; the others come back
        "canceled" or without a result, and are not billed)."""

    @abstractmethod
    def results(self, state: BatchState) -> Iterator[BatchResult]:
        """Yield the results of an ended batch (any order; a request may have none)."""

    @abstractmethod
    def find(self, tag: str, since: float, known: set[str]) -> str | None | bool:
        """Look for a batch created with `tag` at or after `since` (Unix seconds) among the
        vendor's recent batches, ignoring the ids in `known`; return its id, None when the
        vendor has none, or False when it cannot tell yet (a candidate has not ended)."""


class OpenAIBatchAPI(BatchAPI):
    """OpenAI's Batch API (files + batches) over an OpenAIBackend."""

    vendor = "openai"
    ENDED = frozenset({"completed", "failed", "expired", "cancelled"})
    # States a cancel can still stop (OpenAI Batch API: validating, in_progress, finalizing).
    CANCELLABLE = frozenset({"validating", "in_progress", "finalizing"})

    def request(self, cid: str, inp: GradingInput) -> dict[str, Any]:
        body = self.backend._body(self.prompt(inp), self.backend.config.max_tokens)
        return {"custom_id": cid, "method": "POST", "url": "/v1/chat/completions", "body": body}

    def submit(self, requests: list[dict[str, Any]], tag: str) -> BatchState:
        client = self.client()
        data = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in requests).encode()
        upload = self._call(
            client.files.create, file=(f"{tag}.jsonl", data, "application/jsonl"), purpose="batch"
        )
        batch = self._call(
            client.batches.create,
            input_file_id=upload.id,
            endpoint="/v1/chat/completions",
            completion_window="24h",
            metadata={"snaglist_tag": tag},
        )
        return self._state(batch)

    def retrieve(self, batch_id: str) -> BatchState:
        return self._state(self._call(self.client().batches.retrieve, batch_id))

    def cancel(self, batch_id: str) -> BatchState:
        return self._state(self._call(self.client().batches.cancel, batch_id))

    def _state(self, batch: Any) -> BatchState:
        counts = batch.request_counts.model_dump() if batch.request_counts else {}
        errors = getattr(getattr(batch, "errors", None), "data", None) or []
        error = "; ".join(
            f"{e.code}: {e.message}" if getattr(e, "code", None) else str(e.message)
            for e in errors
            if getattr(e, "message", None)
        )
        return BatchState(batch.id, batch.status in self.ENDED, batch.status, counts, error)

    def results(self, state: BatchState) -> Iterator[BatchResult]:
        batch = self._call(self.client().batches.retrieve, state.batch_id)
        for file_id in (batch.output_file_id, batch.error_file_id):
            if not file_id:
                continue
            text = self._call(self.client().files.content, file_id).text
            for line in text.splitlines():
                if line.strip():
                    yield self._result(json.loads(line))

    def _result(self, row: dict[str, Any]) -> BatchResult:
        cid = str(row.get("custom_id") or "")
        response = row.get("response") or {}
        error = row.get("error") or {}
        if response.get("status_code") == 200 and not error:
            return BatchResult(cid, "succeeded", self.backend._completion(response.get("body")))
        code = str(error.get("code") or "")
        kind = {"batch_expired": "expired", "batch_cancelled": "canceled"}.get(code, "errored")
        body = response.get("body") if isinstance(response.get("body"), dict) else {}
        message = error.get("message") or (body.get("error") or {}).get("message") or code
        status = response.get("status_code")
        return BatchResult(cid, kind, error=f"{f'HTTP {status}: ' if status else ''}{message}")

    def find(self, tag: str, since: float, known: set[str]) -> str | None | bool:
        for n, batch in enumerate(self._call(self.client().batches.list, limit=100)):
            if n >= FIND_LIMIT or batch.created_at < since - CLOCK_SKEW_SECONDS:
                break
            if batch.id not in known and (batch.metadata or {}).get("snaglist_tag") == tag:
                return batch.id
        return None


class AnthropicBatchAPI(BatchAPI):
    """Anthropic's Message Batches over an AnthropicBackend."""

    vendor = "anthropic"
    CANCELLABLE = frozenset({"in_progress"})  # processing_status; "canceling" is on its way

    def request(self, cid: str, inp: GradingInput) -> dict[str, Any]:
        params = dict(self.backend._request(self.prompt(inp), self.backend.config.max_tokens))
        params.update(params.pop("extra_body", None) or {})  # plain JSON: no SDK-only keys
        return {"custom_id": cid, "params": params}

    def submit(self, requests: list[dict[str, Any]], tag: str) -> BatchState:
        return self._state(self._call(self.client().messages.batches.create, requests=requests))

    def retrieve(self, batch_id: str) -> BatchState:
        return self._state(self._call(self.client().messages.batches.retrieve, batch_id))

    def cancel(self, batch_id: str) -> BatchState:
        return self._state(self._call(self.client().messages.batches.cancel, batch_id))

    @staticmethod
    def _state(batch: Any) -> BatchState:
        counts = batch.request_counts.model_dump() if batch.request_counts else {}
        status = batch.processing_status
        return BatchState(batch.id, status == "ended", status, counts)

    def results(self, state: BatchState) -> Iterator[BatchResult]:
        for row in self._call(self.client().messages.batches.results, state.batch_id):
            result = row.result
            if result.type == "succeeded":
                completion = self.backend._completion(result.message)
                yield BatchResult(row.custom_id, "succeeded", completion)
                continue
            inner = getattr(getattr(result, "error", None), "error", None)
            message = getattr(inner, "message", "") or result.type
            yield BatchResult(row.custom_id, result.type, error=message)

    def find(self, tag: str, since: float, known: set[str]) -> str | None | bool:
        """Anthropic batches carry no metadata: a candidate (recent, not known) is ours when
        its results' custom ids carry `tag`, which can be read only once it has ended; while
        one has not, the answer is False (cannot tell: do not send the batch again)."""
        client = self.client()
        undecided = False
        for n, batch in enumerate(self._call(client.messages.batches.list, limit=100)):
            if n >= FIND_LIMIT or batch.created_at.timestamp() < since - CLOCK_SKEW_SECONDS:
                break
            if batch.id in known:
                continue
            if batch.processing_status != "ended":
                undecided = True
                continue
            first = next(iter(self._call(client.messages.batches.results, batch.id)), None)
            if first is not None and first.custom_id.startswith(f"{tag}-"):
                return batch.id
        return False if undecided else None


def batch_api_for(backend: Any) -> BatchAPI | None:
    """Return the BatchAPI of a live judge backend, or None when its vendor has none (the
    offline reference judge, test doubles): those pairs are called live."""
    if isinstance(backend, OpenAIBackend):
        return OpenAIBatchAPI(backend)
    if isinstance(backend, AnthropicBackend):
        return AnthropicBatchAPI(backend)
    return None
