"""Judge and auditor backends: parsing, prompts, the reference judge, SDK retries, rate limits.

Plain pytest, no database: `judges` imports no Django. SDK calls go to an
in-process mock transport; the rate limiter runs against real Redis (db 15).
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import json
import os
import random
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from judges import (
    AUDITOR_PROMPT_VERSION,
    JUDGE_PROMPT_VERSION,
    AuditInput,
    GradingInput,
    JudgeConfigError,
    JudgeUnavailable,
    LimiterTimeout,
    NullLimiter,
    RedisLimiter,
    get_backend,
    get_limiter,
    limiter_for,
    parse_grade,
    parse_verdict,
    render_auditor_prompt,
    render_judge_prompt,
)
from judges.figures import extract_figures, extract_locators
from judges.prompts import RELEASED_SHA256, template_sha256
from judges.reference import scale_levels
from judges.retry import RetryPolicy, parse_retry_after, redact
from tests.judge_server import request_text

SCALE = [0, 1, 2]
TEN = list(range(1, 11))

# --------------------------------------------------------------------------------------
# parse_grade / parse_verdict
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "scale", "grade"),
    [
        (
            '{"grade": 2, "rationale": "1100 mm matches", "flag": false, "flag_reason": ""}',
            SCALE,
            2,
        ),
        ('  {"grade": 0}  ', SCALE, 0),
        ('{"grade": "1", "rationale": "partly"}', SCALE, 1),
        ('{"grade": 2.0}', SCALE, 2),
        (
            'Here is my assessment:\n```json\n{"grade": 1, "rationale": "one of two figures"}\n```',
            SCALE,
            1,
        ),
        ('```\n{"grade": 2}\n```', SCALE, 2),
        ('The response is right. {"grade": 2, "rationale": "ok"} Thanks.', SCALE, 2),
        ("Grade: 2", SCALE, 2),
        ("The figure matches the key.\nFinal grade: 1", SCALE, 1),
        ("**Grade:** 0\nThe response gives 900 mm.", SCALE, 0),
        ("grade = 2", SCALE, 2),
        ("**2**", SCALE, 2),
        ("I would award **1** because only one figure matched.", SCALE, 1),
        ("2/2", SCALE, 2),
        ("Overall this deserves 1/2.", SCALE, 1),
        ("Score: 7/10", TEN, 7),
        ("Score: 7/10 - the figure is right, the clause wrong.", TEN, 7),
        ("Grade: 2. The response states **1100** mm, as the key does.", SCALE, 2),
        ("2", SCALE, 2),
        ("Grade: 2\nRationale: grade 2 because 1100 mm matches.", SCALE, 2),
    ],
)
def test_parse_grade_accepts(text: str, scale: list[int], grade: int) -> None:
    got, fields, error = parse_grade(text, scale)
    assert (got, error) == (grade, None)
    assert set(fields) == {"rationale", "flag", "flag_reason"}


def test_parse_grade_reads_json_fields() -> None:
    text = '{"grade": 0, "rationale": "says 1,500 m2 cap", "flag": true, "flag_reason": "cap removed 2024"}'
    grade, fields, error = parse_grade(text, SCALE)
    assert grade == 0 and error is None
    assert fields == {
        "rationale": "says 1,500 m2 cap",
        "flag": True,
        "flag_reason": "cap removed 2024",
    }


@pytest.mark.parametrize(
    ("text", "scale", "reason"),
    [
        ("", SCALE, "empty"),
        ("   \n ", SCALE, "empty"),
        (None, SCALE, "empty"),
        ("I'm sorry, but I can't help with grading this response.", SCALE, "refusal"),
        ("As an AI language model I am unable to evaluate building regulations.", SCALE, "refusal"),
        ("The response is mostly right.", SCALE, "no grade found"),
        ('{"grade": 3, "rationale": "excellent"}', SCALE, "grade 3 is not on the scale [0, 1, 2]"),
        ('{"grade": -1}', SCALE, "not on the scale"),
        ("Grade: 5", SCALE, "not on the scale"),
        ("Score: 11/10", TEN, "not on the scale"),
        ("Score: 0", TEN, "not on the scale"),
        ("Score: 7/10", SCALE, "not out of 2"),
        ('{"grade": 1.5}', SCALE, "not an integer"),
        ("Grade: 1.5", SCALE, "not an integer"),
        ('{"grade": true}', SCALE, "not an integer"),
        ('{"grade": null, "rationale": "cannot tell"}', SCALE, "not an integer"),
        ('{"grade": "two"}', SCALE, "not an integer"),
        ("Grade: 2\n\nOn reflection, Grade: 1.", SCALE, "conflicting grades [1, 2]"),
        ('{"grade": 2} ... actually {"grade": 0}', SCALE, "conflicting grades [0, 2]"),
        ("Grade: 2, though some would say 1/2.", SCALE, "conflicting grades"),
        ("**1** or **2**", SCALE, "conflicting grades"),
    ],
)
def test_parse_grade_refuses(text: str | None, scale: list[int], reason: str) -> None:
    grade, fields, error = parse_grade(text, scale)
    assert grade is None
    assert error is not None and reason in error


@pytest.mark.parametrize("stop_reason", ["length", "max_tokens", "LENGTH"])
def test_parse_grade_refuses_cut_off_reply_even_if_it_parses(stop_reason: str) -> None:
    grade, _, error = parse_grade(
        '{"grade": 2, "rationale": "the figure', SCALE, stop_reason=stop_reason
    )
    assert (grade, error) == (None, "truncated")
    grade, _, error = parse_grade("Grade: 2", SCALE, stop_reason=stop_reason)
    assert (grade, error) == (None, "truncated")


def test_parse_grade_rejects_an_invalid_scale() -> None:
    with pytest.raises(ValueError):
        parse_grade("Grade: 1", [])
    with pytest.raises(ValueError):
        parse_grade("Grade: 1", [0, 1, 1])


@pytest.mark.parametrize(
    ("text", "verdict"),
    [
        ('{"verdict": "correct", "rationale": "Table 4.1 gives 45 m"}', "correct"),
        ('```json\n{"verdict": "wrong", "rationale": "cap removed"}\n```', "wrong"),
        ('{"verdict": "Ungradeable", "rationale": "ambiguous"}', "ungradeable"),
        ('{"verdict": "incorrect"}', "wrong"),
        ("Verdict: correct", "correct"),
        ("**Verdict:** ungradeable - the question is ambiguous.", "ungradeable"),
        ("**wrong**", "wrong"),
        ("correct", "correct"),
    ],
)
def test_parse_verdict_accepts(text: str, verdict: str) -> None:
    got, fields, error = parse_verdict(text)
    assert (got, error) == (verdict, None)
    assert "rationale" in fields


@pytest.mark.parametrize(
    ("text", "stop_reason", "reason"),
    [
        ("", None, "empty"),
        ("I cannot assess this key entry.", None, "refusal"),
        ("The key looks fine to me.", None, "no verdict found"),
        ('{"verdict": "maybe"}', None, "unknown verdict"),
        ('{"verdict": "correct"} {"verdict": "wrong"}', None, "conflicting verdicts"),
        ("Verdict: correct. Second thoughts - Verdict: wrong.", None, "conflicting verdicts"),
        ('{"verdict": "correct"}', "max_tokens", "truncated"),
    ],
)
def test_parse_verdict_refuses(text: str, stop_reason: str | None, reason: str) -> None:
    verdict, _, error = parse_verdict(text, stop_reason=stop_reason)
    assert verdict is None
    assert error is not None and reason in error


# --------------------------------------------------------------------------------------
# Prompts
# --------------------------------------------------------------------------------------

GUARD_Q = "What is the minimum height of guarding to a balcony of a dwelling?"
GUARD_KEY = "Not less than 1100 mm."
GUARD_CITE = "Approved Document K (2013) Diagram 3.1: guarding to balconies and roofs 1100mm"


def test_judge_prompt_holds_question_key_citation_and_response_only() -> None:
    inp = GradingInput(GUARD_Q, GUARD_KEY, GUARD_CITE, "At least 1100 mm.", SCALE)
    prompt = render_judge_prompt(inp)
    for part in (GUARD_Q, GUARD_KEY, GUARD_CITE, "At least 1100 mm."):
        assert part in prompt
    assert "substance, not style" in prompt
    assert "hedges" in prompt and "wrong figure gets the bottom grade" in prompt
    assert "Length earns nothing" in prompt
    assert '"grade"' in prompt and '"flag"' in prompt and '"flag_reason"' in prompt
    assert "0 = wrong, 1 = partly right, 2 = right" in prompt
    assert "$" not in prompt  # every placeholder substituted


def test_grading_input_has_no_field_for_the_model_under_test() -> None:
    names = {f.name for f in dataclasses.fields(GradingInput)}
    assert names == {"question", "key_answer", "citation_text", "response", "scale"}


def test_judge_prompt_describes_a_one_to_ten_scale() -> None:
    prompt = render_judge_prompt(GradingInput(GUARD_Q, GUARD_KEY, GUARD_CITE, "x", TEN))
    assert "1, 2, 3, 4, 5, 6, 7, 8, 9, 10" in prompt
    assert "1 = wrong, 10 = right" in prompt


def test_auditor_prompt_has_no_response() -> None:
    prompt = render_auditor_prompt(AuditInput(GUARD_Q, GUARD_KEY, GUARD_CITE))
    assert GUARD_Q in prompt and GUARD_KEY in prompt and GUARD_CITE in prompt
    assert "RESPONSE" not in prompt
    assert '"verdict"' in prompt and "ungradeable" in prompt


def test_released_prompt_templates_are_unchanged() -> None:
    """Editing a released template needs a new file and version: grades are stored per version."""
    assert (JUDGE_PROMPT_VERSION, AUDITOR_PROMPT_VERSION) == ("judge-v1", "auditor-v1")
    for version, digest in RELEASED_SHA256.items():
        assert template_sha256(version) == digest, f"{version}.txt changed: add a new version"


def test_a_response_containing_template_syntax_is_not_expanded() -> None:
    inp = GradingInput(GUARD_Q, GUARD_KEY, GUARD_CITE, "Use $question and {grade} here", SCALE)
    assert "Use $question and {grade} here" in render_judge_prompt(inp)


# --------------------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------------------


def test_figures_are_normalised_and_references_are_not_figures() -> None:
    figs = extract_figures(
        "Approved Document B Vol 1 (2019) Table 3.1 and BS 9999:2017 clause 16.2.3: not less than "
        "1.1 m, a maximum of 18 m, REI 60, gradient 1:12, 0.18 W/m²K, 1,500 m², two storeys"
    )
    assert [(f.label(), f.dim, f.value, f.direction) for f in figs] == [
        ("1.1 m", "length", 1100.0, "min"),
        ("18 m", "length", 18000.0, "max"),
        ("REI 60", "time", 60.0, None),
        ("1:12", "ratio", 12.0, None),
        ("0.18 W/(m²·K)", "u_value", 0.18, None),
        ("1,500 m²", "area", 1500.0, None),
        ("two storeys", "storeys", 2.0, None),
    ]


def test_ranges_share_their_unit() -> None:
    figs = extract_figures("between 900 and 1000 mm")
    assert [(f.value, f.dim, f.in_range) for f in figs] == [
        (900.0, "length", True),
        (1000.0, "length", True),
    ]


def test_locators_are_read() -> None:
    locs = extract_locators("See Table 4.1, paragraph 2.5, Diagram 3.1 and Class MA; § 5.2")
    assert [loc.label() for loc in locs] == [
        "Table 4.1",
        "paragraph 2.5",
        "Diagram 3.1",
        "Class MA",
        "paragraph 5.2",
    ]


# --------------------------------------------------------------------------------------
# Reference judge
# --------------------------------------------------------------------------------------


def lenient() -> Any:
    return get_backend({"backend": "reference", "strictness": "lenient"})


def strict() -> Any:
    return get_backend({"backend": "reference", "strictness": "strict"})


def guard(response: str, scale: list[int] = SCALE) -> GradingInput:
    return GradingInput(GUARD_Q, GUARD_KEY, GUARD_CITE, response, scale)


def test_reference_correct_answer_gets_top_grade() -> None:
    result = lenient().grade(
        guard("Guarding must be at least 1100 mm high (Diagram 3.1, Approved Document K).")
    )
    assert result.grade == 2
    assert "figure 1100 mm matches" in result.rationale
    assert "locator Diagram 3.1 matches" in result.rationale
    assert result.flag is False and result.parse_error is None
    assert json.loads(result.raw_output)["grade"] == 2
    assert result.prompt_version == "reference-judge-v1-lenient"


def test_reference_hedged_but_correct_figure_gets_top_grade_at_both_strictnesses() -> None:
    hedged = (
        "I'm not completely certain and you should check the current edition, but I believe "
        "balcony guarding needs to be about 1.1 m high at minimum."
    )
    for judge in (lenient(), strict()):
        result = judge.grade(guard(hedged))
        assert result.grade == 2, result.rationale
        assert "figure 1100 mm matches" in result.rationale
        assert "locator Diagram 3.1 not mentioned" in result.rationale


def test_reference_right_figure_wrong_clause_costs_a_point_only_when_strict() -> None:
    response = "At least 1100 mm, see Diagram 2.1 of Approved Document K."
    loose, tight = lenient().grade(guard(response)), strict().grade(guard(response))
    assert (loose.grade, tight.grade) == (2, 1)
    assert "locator Diagram 2.1 cited, key cites Diagram 3.1" in tight.rationale
    assert "strict: costs one level" in tight.rationale


def test_reference_wrong_document_costs_a_point_only_when_strict() -> None:
    response = "Approved Document M requires at least 1100 mm."
    assert lenient().grade(guard(response)).grade == 2
    result = strict().grade(guard(response))
    assert result.grade == 1
    assert "cites Approved Document M, key cites Approved Document K" in result.rationale


def test_reference_fluent_wrong_figure_gets_bottom_grade() -> None:
    response = (
        "Under Approved Document K, guarding to a balcony must be a minimum of 900 mm high, "
        "measured from finished floor level, and it must not be climbable by small children."
    )
    for judge in (lenient(), strict()):
        result = judge.grade(guard(response))
        assert result.grade == 0
        assert "figure 1100 mm not stated" in result.rationale
        assert "response states 900 mm" in result.rationale


def test_reference_right_number_wrong_direction_gets_bottom_grade() -> None:
    result = lenient().grade(guard("Guarding should be a maximum of 1100 mm high."))
    assert result.grade == 0
    assert "stated as a maximum, key says minimum" in result.rationale


@pytest.mark.parametrize(
    "response",
    [
        "",
        "   ",
        "I'm sorry, I can't provide advice on building regulations. Please consult a building control officer.",
        "As an AI, I do not have access to the Approved Documents.",
    ],
)
def test_reference_refusal_or_empty_gets_bottom_grade(response: str) -> None:
    result = lenient().grade(guard(response, TEN))
    assert result.grade == 1
    assert "refusal" in result.rationale or "empty" in result.rationale


def test_reference_partly_right_when_some_figures_match() -> None:
    inp = GradingInput(
        "What is the permitted range of handrail heights on a stair in a dwelling?",
        "Between 900 and 1000 mm above the pitch line.",
        "Approved Document K (2013) paragraph 1.36: between 900mm and 1000mm",
        "The handrail should be at least 900 mm above the pitch line.",
        SCALE,
    )
    result = lenient().grade(inp)
    assert result.grade == 1
    assert (
        "figure 900 mm matches" in result.rationale
        and "figure 1000 mm not stated" in result.rationale
    )


def test_reference_competing_figure_is_tolerated_only_when_lenient() -> None:
    response = "Either 900 mm or 1100 mm minimum depending on where the guarding is."
    assert lenient().grade(guard(response)).grade == 2
    result = strict().grade(guard(response))
    assert result.grade == 1
    assert "also states 900 mm, not in the key" in result.rationale


def test_reference_flags_a_key_the_response_says_was_repealed() -> None:
    inp = GradingInput(
        "What floorspace limit applies to a change of use from Class E to residential under Class MA?",
        "Class MA has a 1,500 m² floorspace limit.",
        "GPDO 2015 (as amended 2021) Schedule 2 Part 3 Class MA: MA.1(1)(b) the cumulative floor "
        "space ... exceeds 1,500 square metres",
        "There is no longer any floorspace limit: the 1,500 m² cap was removed in March 2024, so "
        "Class MA now applies regardless of size (subject to prior approval).",
        SCALE,
    )
    for judge in (lenient(), strict()):
        result = judge.grade(inp)
        assert result.flag is True
        assert "March 2024" in result.flag_reason and "1,500 m²" in result.flag_reason
        assert result.grade == 0  # graded against the key as it stands; the flag sends it to review
        assert "no longer applies" in result.rationale


def test_reference_does_not_flag_an_ordinary_wrong_answer() -> None:
    assert lenient().grade(guard("It must be 900 mm.")).flag is False


def test_reference_yes_no_polarity() -> None:
    def ask(response: str) -> int | None:
        inp = GradingInput(
            "Is a fire door required between an integral garage and the house?",
            "Yes - the door between the garage and the dwelling must be a fire door (E 30 Sa).",
            "Approved Document B Vol 1 (2019) paragraph 5.7: door to be E 30 Sa",
            response,
            SCALE,
        )
        return lenient().grade(inp).grade

    assert ask("Yes, an E30 self-closing fire door is required.") == 2
    assert ask("No, an ordinary door is fine.") == 0


def test_reference_term_overlap_for_keys_without_figures() -> None:
    inp = GradingInput(
        "Under CDM 2015, who must plan, manage and monitor the pre-construction phase?",
        "The Principal Designer.",
        "CDM 2015 Regulation 11",
        "That is the duty of the principal designer appointed by the client.",
        SCALE,
    )
    assert lenient().grade(inp).grade == 2
    wrong = dataclasses.replace(inp, response="The principal contractor.")
    assert lenient().grade(wrong).grade == 1
    assert lenient().grade(dataclasses.replace(inp, response="The client.")).grade == 0


def test_reference_maps_levels_onto_a_one_to_ten_scale() -> None:
    assert scale_levels(SCALE) == (0, 1, 2)
    assert scale_levels(TEN) == (1, 5, 10)
    assert scale_levels([1, 2, 3, 4, 5]) == (1, 3, 5)
    judge = lenient()
    assert judge.grade(guard("at least 1100 mm", TEN)).grade == 10
    assert judge.grade(guard("900 mm", TEN)).grade == 1
    inp = GradingInput("Q?", "Between 900 and 1000 mm.", "", "at least 900 mm", TEN)
    assert judge.grade(inp).grade == 5


def test_reference_is_deterministic_across_processes() -> None:
    """Same input, same output, even with different string-hash seeds."""
    code = (
        "import json;from judges import get_backend, GradingInput;"
        "b=get_backend({'backend':'reference','strictness':'strict'});"
        "r=b.grade(GradingInput('Q?','Not less than 1100 mm (Table 1.1, Diagram 3.1, Approved Document K).',"
        "'Approved Document K (2013) Table 1.1: 1100mm','Either 900 mm or 1100 mm minimum, Table 2.2, "
        "Approved Document M; removed in 2020',[0,1,2]));print(r.raw_output)"
    )
    outputs = set()
    for seed in ("1", "2", "3"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        run = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            env=env,
            cwd=Path(__file__).resolve().parents[1],
            check=True,
        )
        outputs.add(run.stdout)
    assert len(outputs) == 1


# --------------------------------------------------------------------------------------
# Reference auditor
# --------------------------------------------------------------------------------------


def test_reference_auditor_verdicts() -> None:
    judge = lenient()
    ok = judge.audit(AuditInput(GUARD_Q, GUARD_KEY, GUARD_CITE))
    assert ok.verdict == "correct" and "1100 mm" in ok.rationale
    assert ok.prompt_version == "reference-auditor-v1" and ok.parse_error is None

    wrong = judge.audit(AuditInput(GUARD_Q, "Not less than 1000 mm.", GUARD_CITE))
    assert wrong.verdict == "wrong"
    assert "1100 mm" in wrong.rationale and "1000 mm" in wrong.rationale

    no_figure = judge.audit(
        AuditInput(GUARD_Q, "Guarding must be provided to balconies.", GUARD_CITE)
    )
    assert no_figure.verdict == "ungradeable"

    yes_no = judge.audit(
        AuditInput(
            "Is a fire door required to an integral garage?", "See the Approved Document.", ""
        )
    )
    assert yes_no.verdict == "ungradeable"

    assert judge.audit(AuditInput(GUARD_Q, "  ", GUARD_CITE)).verdict == "ungradeable"
    assert json.loads(wrong.raw_output)["verdict"] == "wrong"


# --------------------------------------------------------------------------------------
# Config
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "config",
    [
        {"backend": "gemini", "model": "x"},
        {"backend": "openai"},
        {"backend": "openai", "model": "m", "max_token": 10},
        {"backend": "openai", "model": "m", "max_tokens": 0},
        {"backend": "openai", "model": "m", "temperature": "hot"},
        {"backend": "reference", "strictness": "harsh"},
        {"backend": "openai", "model": "m", "api_key_env": 12},
    ],
)
def test_bad_config_is_refused(config: dict[str, Any]) -> None:
    with pytest.raises(JudgeConfigError):
        get_backend(config)


# --------------------------------------------------------------------------------------
# SDK backends against a mock HTTP transport
# --------------------------------------------------------------------------------------

SECRET = "sk-test-" + "Zq9" * 12
KEY_ENV = "SNAGLIST_JUDGE_KEY_TEST"
GOOD_JSON = '{"grade": 2, "rationale": "1100 mm matches", "flag": false, "flag_reason": ""}'


def openai_body(text: str, finish_reason: str = "stop") -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "judge-model",
        "choices": [
            {
                "index": 0,
                "finish_reason": finish_reason,
                "message": {"role": "assistant", "content": text},
            }
        ],
    }


def anthropic_body(text: str, stop_reason: str = "end_turn") -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "judge-model",
        "content": [{"type": "text", "text": text}],
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 10},
    }


def ok(sdk: str, text: str = GOOD_JSON) -> tuple[int, dict[str, str], dict[str, Any]]:
    return 200, {}, openai_body(text) if sdk == "openai" else anthropic_body(text)


def cut_off(sdk: str) -> tuple[int, dict[str, str], dict[str, Any]]:
    if sdk == "openai":
        return 200, {}, openai_body('{"grade": 2, "rationale": "the fig', "length")
    return 200, {}, anthropic_body('{"grade": 2, "rationale": "the fig', "max_tokens")


def error(
    status: int, headers: dict[str, str] | None = None, message: str = "nope"
) -> tuple[int, dict[str, str], dict[str, Any]]:
    return (
        status,
        headers or {},
        {"type": "error", "error": {"type": "api_error", "message": message}},
    )


class FakeServer:
    """Replay scripted replies through a mock transport and record each request.

    A script item is (status, headers, json body), or an exception name ("timeout",
    "connect") raised by the transport.
    """

    def __init__(self, sdk: str, script: list[Any]) -> None:
        self.sdk = sdk
        self.script = list(script)
        self.requests: list[dict[str, Any]] = []
        self.client = self._client()

    def _client(self) -> Any:
        sdk_module = importlib.import_module(self.sdk)
        ctor = sdk_module.OpenAI if self.sdk == "openai" else sdk_module.Anthropic
        # The brief's httpx first; SDK releases built on httpx2 refuse httpx objects.
        for name in ("httpx", "httpx2"):
            try:
                http = importlib.import_module(name)
            except ImportError:
                continue
            client = http.Client(transport=http.MockTransport(self._handler(http)))
            try:
                ctor(api_key="probe", http_client=client, max_retries=0)
            except TypeError:
                client.close()
                continue
            return client
        raise RuntimeError(f"no httpx flavour accepted by {self.sdk}")

    def _handler(self, http: Any) -> Any:
        def handle(request: Any) -> Any:
            body = json.loads(request.content or b"{}")
            self.requests.append(
                {"headers": dict(request.headers), "body": body, "url": str(request.url)}
            )
            item = self.script.pop(0) if len(self.script) > 1 else self.script[0]
            if item == "timeout":
                raise http.ReadTimeout("timed out", request=request)
            if item == "connect":
                raise http.ConnectError("refused", request=request)
            status, headers, payload = item
            return http.Response(status, headers=headers, json=payload)

        return handle

    def max_tokens(self) -> list[int]:
        return [r["body"].get("max_tokens") for r in self.requests]


SDKS = ["openai", "anthropic"]


@pytest.fixture
def secret_env(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(KEY_ENV, SECRET)
    return SECRET


class Sleeps(list):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def backend(sdk: str, server: FakeServer, sleeps: Sleeps, **extra: Any) -> Any:
    config = {
        "backend": sdk,
        "model": "judge-model",
        "api_key_env": KEY_ENV,
        "max_tokens": 300,
        "base_url": "http://judge.test/v1" if sdk == "openai" else "http://judge.test",
        **extra,
    }
    return get_backend(config, http_client=server.client, sleep=sleeps, rng=random.Random(7))


@pytest.mark.parametrize("sdk", SDKS)
def test_sdk_backend_grades_and_sends_the_key_from_the_environment(
    sdk: str, secret_env: str
) -> None:
    server, sleeps = FakeServer(sdk, [ok(sdk)]), Sleeps()
    result = backend(sdk, server, sleeps).grade(guard("At least 1100 mm."))
    assert (result.grade, result.parse_error, result.prompt_version) == (2, None, "judge-v1")
    assert result.raw_output == GOOD_JSON
    assert result.stop_reason == ("stop" if sdk == "openai" else "end_turn")
    sent = server.requests[0]
    auth = sent["headers"].get("authorization") or sent["headers"].get("x-api-key")
    assert secret_env in auth
    prompt = request_text(sent["body"])  # Anthropic's: two text blocks, the prefix marked
    assert GUARD_Q in prompt and "At least 1100 mm." in prompt
    assert sent["body"]["max_tokens"] == 300 and sleeps == []


def test_openai_sends_temperature_zero_and_json_mode(secret_env: str) -> None:
    server = FakeServer("openai", [ok("openai")])
    backend("openai", server, Sleeps()).grade(guard("1100 mm"))
    body = server.requests[0]["body"]
    assert body["temperature"] == 0 and body["response_format"] == {"type": "json_object"}
    server = FakeServer("openai", [ok("openai")])
    backend(
        "openai", server, Sleeps(), json_mode=False, max_tokens_param="max_completion_tokens"
    ).grade(guard("1100 mm"))
    body = server.requests[0]["body"]
    assert "response_format" not in body and body["max_completion_tokens"] == 300


def test_anthropic_sends_temperature_only_when_configured(secret_env: str) -> None:
    server = FakeServer("anthropic", [ok("anthropic")])
    backend("anthropic", server, Sleeps()).grade(guard("1100 mm"))
    assert "temperature" not in server.requests[0]["body"]
    server = FakeServer("anthropic", [ok("anthropic")])
    backend("anthropic", server, Sleeps(), temperature=0).grade(guard("1100 mm"))
    assert server.requests[0]["body"]["temperature"] == 0


@pytest.mark.parametrize("sdk", SDKS)
def test_sdk_backend_honours_retry_after_seconds_on_429(sdk: str, secret_env: str) -> None:
    server, sleeps = FakeServer(sdk, [error(429, {"retry-after": "7"}), ok(sdk)]), Sleeps()
    result = backend(sdk, server, sleeps).grade(guard("1100 mm"))
    assert result.grade == 2
    assert len(server.requests) == 2 and sleeps == [7.0]


@pytest.mark.parametrize("sdk", SDKS)
def test_sdk_backend_retries_500_with_jittered_backoff(sdk: str, secret_env: str) -> None:
    server, sleeps = FakeServer(sdk, [error(500), error(503), ok(sdk)]), Sleeps()
    assert backend(sdk, server, sleeps, base_delay=2.0).grade(guard("1100 mm")).grade == 2
    assert len(server.requests) == 3 and len(sleeps) == 2
    assert 0 <= sleeps[0] <= 2.0 and 0 <= sleeps[1] <= 4.0


@pytest.mark.parametrize("sdk", SDKS)
def test_sdk_backend_retries_timeouts_and_connection_errors(sdk: str, secret_env: str) -> None:
    server, sleeps = FakeServer(sdk, ["timeout", "connect", ok(sdk)]), Sleeps()
    assert backend(sdk, server, sleeps).grade(guard("1100 mm")).grade == 2
    assert len(server.requests) == 3 and len(sleeps) == 2


@pytest.mark.parametrize("sdk", SDKS)
def test_sdk_backend_gives_up_after_the_cap(sdk: str, secret_env: str) -> None:
    server, sleeps = FakeServer(sdk, [error(503)]), Sleeps()
    judge = backend(sdk, server, sleeps, max_retries=3, base_delay=10.0, max_delay=15.0)
    with pytest.raises(JudgeUnavailable) as caught:
        judge.grade(guard("1100 mm"))
    assert len(server.requests) == 4 and len(sleeps) == 3
    assert all(0 <= s <= 15.0 for s in sleeps)
    assert "503" in str(caught.value) and caught.value.__context__ is None


@pytest.mark.parametrize("sdk", SDKS)
@pytest.mark.parametrize("status", [400, 401, 403, 404])
def test_sdk_backend_does_not_retry_client_errors(sdk: str, status: int, secret_env: str) -> None:
    # Some APIs echo the key in a 401 body; it must not reach the exception.
    server = FakeServer(sdk, [error(status, message=f"Incorrect API key provided: {SECRET}")])
    sleeps = Sleeps()
    with pytest.raises(JudgeConfigError) as caught:
        backend(sdk, server, sleeps).grade(guard("1100 mm"))
    assert len(server.requests) == 1 and sleeps == []
    assert str(status) in str(caught.value)
    for text in (str(caught.value), repr(caught.value)):
        assert SECRET not in text and SECRET[8:20] not in text
    assert caught.value.__context__ is None and caught.value.__cause__ is None


@pytest.mark.parametrize("sdk", SDKS)
def test_sdk_backend_asks_again_with_a_bigger_budget_when_cut_off(
    sdk: str, secret_env: str
) -> None:
    server, sleeps = FakeServer(sdk, [cut_off(sdk), ok(sdk)]), Sleeps()
    result = backend(sdk, server, sleeps).grade(guard("1100 mm"))
    assert result.grade == 2 and result.parse_error is None
    first, second = server.max_tokens()
    assert second > first and (first, second) == (300, 600)


@pytest.mark.parametrize("sdk", SDKS)
def test_sdk_backend_reports_truncated_when_cut_off_twice(sdk: str, secret_env: str) -> None:
    server, sleeps = FakeServer(sdk, [cut_off(sdk)]), Sleeps()
    result = backend(sdk, server, sleeps).grade(guard("1100 mm"))
    assert (result.grade, result.parse_error) == (None, "truncated")
    assert result.stop_reason in ("length", "max_tokens")
    assert server.max_tokens() == [300, 600]


@pytest.mark.parametrize("sdk", SDKS)
def test_sdk_backend_returns_parse_errors_instead_of_raising(sdk: str, secret_env: str) -> None:
    server = FakeServer(sdk, [ok(sdk, "I cannot grade this response.")])
    result = backend(sdk, server, Sleeps()).grade(guard("1100 mm"))
    assert (result.grade, result.parse_error) == (None, "refusal")
    assert result.raw_output == "I cannot grade this response."


@pytest.mark.parametrize("sdk", SDKS)
def test_sdk_backend_audits(sdk: str, secret_env: str) -> None:
    server = FakeServer(
        sdk, [ok(sdk, '```json\n{"verdict": "wrong", "rationale": "cap removed"}\n```')]
    )
    result = backend(sdk, server, Sleeps()).audit(AuditInput(GUARD_Q, GUARD_KEY, GUARD_CITE))
    assert (result.verdict, result.rationale, result.prompt_version) == (
        "wrong",
        "cap removed",
        "auditor-v1",
    )
    assert "RESPONSE" not in server.requests[0]["body"]["messages"][0]["content"]


@pytest.mark.parametrize("sdk", SDKS)
def test_secret_is_read_at_call_time_and_never_kept(
    sdk: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    server, sleeps = FakeServer(sdk, [ok(sdk)]), Sleeps()
    judge = backend(sdk, server, sleeps)
    with pytest.raises(JudgeConfigError, match=KEY_ENV):
        judge.grade(guard("1100 mm"))
    assert server.requests == []

    monkeypatch.setenv(KEY_ENV, SECRET)
    result = judge.grade(guard("1100 mm"))
    assert result.grade == 2
    kept = repr(judge) + repr(vars(judge)) + repr(judge.config) + repr(result)
    assert SECRET not in kept


def test_retry_after_accepts_an_http_date_and_milliseconds() -> None:
    now = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert (
        parse_retry_after({"Retry-After": "Wed, 01 Jan 2025 12:00:30 GMT"}, now=lambda: now) == 30.0
    )
    assert (
        parse_retry_after({"Retry-After": "Wed, 01 Jan 2025 11:00:00 GMT"}, now=lambda: now) == 0.0
    )
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert parse_retry_after({"Retry-After": "soon"}) is None
    assert parse_retry_after({}) is None


def test_backoff_is_full_jitter_capped_and_clamps_retry_after() -> None:
    policy = RetryPolicy(base_delay=1.0, max_delay=60.0, rng=random.Random(1))
    for attempt in range(10):
        assert 0.0 <= policy.delay(attempt, None) <= min(60.0, 2**attempt)
    assert policy.delay(0, 120.0) == 60.0
    assert policy.delay(3, 2.5) == 2.5


@pytest.mark.parametrize("sdk", SDKS)
def test_http_date_retry_after_is_honoured_by_the_backend(sdk: str, secret_env: str) -> None:
    date = "Wed, 01 Jan 2099 12:00:00 GMT"  # far future: clamped to max_delay
    server, sleeps = FakeServer(sdk, [error(429, {"retry-after": date}), ok(sdk)]), Sleeps()
    assert backend(sdk, server, sleeps, max_delay=45.0).grade(guard("1100 mm")).grade == 2
    assert sleeps == [45.0]


def test_redact_hides_key_shaped_strings() -> None:
    assert SECRET not in redact(f"bad key {SECRET}", SECRET)
    assert "sk-proj-" not in redact("Incorrect API key provided: sk-proj-abcd****wxyz")


@pytest.mark.parametrize("sdk", SDKS)
def test_each_attempt_takes_a_limiter_slot(sdk: str, secret_env: str) -> None:
    class CountingLimiter(NullLimiter):
        entered = 0

        def slot(self, timeout: float | None = None) -> Any:
            CountingLimiter.entered += 1
            return super().slot(timeout)

    server = FakeServer(sdk, [error(429, {"retry-after": "0"}), ok(sdk)])
    config = {"backend": sdk, "model": "m", "api_key_env": KEY_ENV, "base_url": "http://judge.test"}
    judge = get_backend(
        config, http_client=server.client, sleep=Sleeps(), limiter=CountingLimiter()
    )
    assert judge.grade(guard("1100 mm")).grade == 2
    assert CountingLimiter.entered == 2


# --------------------------------------------------------------------------------------
# Redis rate limiter (real Redis, db 15)
# --------------------------------------------------------------------------------------


@pytest.fixture
def redis_db() -> Any:
    redis = pytest.importorskip("redis")
    client = redis.Redis(host="127.0.0.1", port=6379, db=15)
    try:
        client.ping()
    except redis.exceptions.ConnectionError:
        pytest.fail("Redis is not running on 127.0.0.1:6379")
    created: list[RedisLimiter] = []
    yield client, created
    for limiter in created:
        client.delete(*limiter.keys())
    client.close()


def make_limiter(redis_db: Any, judge_key: str, **kwargs: Any) -> RedisLimiter:
    client, created = redis_db
    limiter = RedisLimiter(client, judge_key, prefix="snaglist-test:judges", **kwargs)
    created.append(limiter)
    return limiter


def test_no_redis_means_no_limits() -> None:
    limiter = get_limiter(None, "judge-a", max_concurrency=1, rpm=1)
    assert isinstance(limiter, NullLimiter)
    for _ in range(5):
        with limiter.slot(timeout=0):
            pass


def test_concurrency_cap_is_respected_across_workers(redis_db: Any) -> None:
    key = f"conc-{uuid.uuid4().hex}"
    # Separate limiter objects stand in for separate worker processes sharing Redis.
    workers = [make_limiter(redis_db, key, max_concurrency=2, poll_seconds=0.005) for _ in range(4)]
    lock, active, peak, done = threading.Lock(), [0], [0], []

    def call(limiter: RedisLimiter) -> None:
        with limiter.slot(timeout=10):
            with lock:
                active[0] += 1
                peak[0] = max(peak[0], active[0])
            time.sleep(0.03)
            with lock:
                active[0] -= 1
        done.append(1)

    threads = [threading.Thread(target=call, args=(workers[i % 4],)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert len(done) == 12
    assert peak[0] == 2
    client, _ = redis_db
    assert client.zcard(workers[0].lease_key) == 0


def test_rpm_window_admits_only_rpm_requests_per_window(redis_db: Any) -> None:
    key = f"rpm-{uuid.uuid4().hex}"
    a = make_limiter(redis_db, key, rpm=3, window_seconds=0.5)
    b = make_limiter(redis_db, key, rpm=3, window_seconds=0.5)
    assert [a.try_take_token(), b.try_take_token(), a.try_take_token()] == [0.0, 0.0, 0.0]
    wait = b.try_take_token()
    assert 0 < wait <= 0.5
    with pytest.raises(LimiterTimeout):
        with a.slot(timeout=0.05):
            pass
    time.sleep(0.55)
    assert a.try_take_token() == 0.0
    with b.slot(timeout=2):
        pass
    client, _ = redis_db
    assert 0 < client.pttl(a.rpm_key) <= 1500  # the window key expires on its own


def test_slot_waits_for_the_rpm_window_then_proceeds(redis_db: Any) -> None:
    limiter = make_limiter(redis_db, f"rpm-{uuid.uuid4().hex}", rpm=2, window_seconds=0.3)
    started = time.monotonic()
    for _ in range(4):
        with limiter.slot(timeout=5):
            pass
    assert time.monotonic() - started >= 0.25


def test_a_lease_held_by_a_dead_worker_expires(redis_db: Any) -> None:
    key = f"lease-{uuid.uuid4().hex}"
    dead = make_limiter(redis_db, key, max_concurrency=1, lease_seconds=0.2)
    alive = make_limiter(redis_db, key, max_concurrency=1, lease_seconds=0.2)
    lease, _ = dead.try_acquire_lease()
    assert lease is not None
    assert alive.try_acquire_lease()[0] is None
    time.sleep(0.25)
    taken, _ = alive.try_acquire_lease()
    assert taken is not None
    assert alive.extend_lease(taken) is True
    assert dead.extend_lease(lease) is False
    alive.release_lease(taken)


def _in_own_loop(coro_fn: Any) -> threading.Thread:
    """Run coro_fn() with asyncio.run on a thread of its own: a worker process's judge loop."""
    thread = threading.Thread(target=lambda: asyncio.run(coro_fn()), daemon=True)
    thread.start()
    return thread


def test_event_loop_slots_keep_the_cap_across_workers(redis_db: Any) -> None:
    """aslot (the batched lease broker) never lets more than the cap run, over 3 "workers"
    (limiter objects on loops of their own), and leaves no lease behind."""
    key = f"aconc-{uuid.uuid4().hex}"
    workers = [make_limiter(redis_db, key, max_concurrency=3, poll_seconds=0.005) for _ in range(3)]
    lock, active, peak, done = threading.Lock(), [0], [0], []

    async def calls(limiter: RedisLimiter) -> None:
        async def one() -> None:
            async with limiter.aslot(timeout=10):
                with lock:
                    active[0] += 1
                    peak[0] = max(peak[0], active[0])
                await asyncio.sleep(0.02)
                with lock:
                    active[0] -= 1
            done.append(1)

        await asyncio.gather(*(one() for _ in range(8)))
        await asyncio.sleep(0.05)  # the releases go out with the broker's next exchange

    threads = [_in_own_loop(lambda w=w: calls(w)) for w in workers]
    for t in threads:
        t.join(30)
    assert len(done) == 24
    assert peak[0] == 3
    client, _ = redis_db
    assert client.zcard(workers[0].lease_key) == 0


def test_event_loop_slots_share_the_cap_between_waiting_workers(redis_db: Any) -> None:
    """A worker holding every slot does not take a freed one back while another waits: with
    two workers waiting each may hold ceil(cap / 2), so the freed slot goes to the other.
    (The holder's share is stale, older than 2 x poll_seconds, so its freed slot goes back
    through Redis rather than straight to its own waiting call.)"""
    key = f"share-{uuid.uuid4().hex}"
    a = make_limiter(redis_db, key, max_concurrency=4, poll_seconds=0.005)
    b = make_limiter(redis_db, key, max_concurrency=4, poll_seconds=0.005)
    events: list[str] = []
    a_holding, b_waiting, stop = threading.Event(), threading.Event(), threading.Event()

    async def worker_a() -> None:
        gates = [asyncio.Event() for _ in range(4)]
        entered = [0]

        async def hold(gate: asyncio.Event) -> None:
            async with a.aslot(timeout=5):
                entered[0] += 1
                await gate.wait()

        holders = [asyncio.create_task(hold(g)) for g in gates]
        while entered[0] < 4:
            await asyncio.sleep(0.005)
        a_holding.set()
        while not b_waiting.is_set():
            await asyncio.sleep(0.005)
        await asyncio.sleep(0.05)  # b has asked at least once: it is in the demand set

        async def again() -> None:
            async with a.aslot(timeout=5):
                events.append("a again")

        gates[0].set()  # free one slot, and ask for one more at once
        late = asyncio.create_task(again())
        while not stop.is_set():
            await asyncio.sleep(0.005)
        for g in gates[1:]:
            g.set()
        await asyncio.gather(*holders, late)
        await asyncio.sleep(0.05)  # the releases go out with the broker's next exchange

    async def worker_b() -> None:
        while not a_holding.is_set():
            await asyncio.sleep(0.005)
        b_waiting.set()
        async with b.aslot(timeout=5):
            events.append("b")
        stop.set()
        await asyncio.sleep(0.05)  # the release goes out with the broker's next exchange

    threads = [_in_own_loop(worker_a), _in_own_loop(worker_b)]
    for t in threads:
        t.join(30)
    assert events == ["b", "a again"]
    client, _ = redis_db
    assert client.zcard(a.lease_key) == 0


def test_event_loop_slot_freed_here_passes_to_a_waiting_call_without_a_redis_exchange(
    redis_db: Any,
) -> None:
    """A slot freed while a call of the same worker waits goes straight to that call: no
    exchange with Redis between the release and the entry, and Redis never holds more than
    the cap. (poll_seconds 0.5: the broker's share stays fresh for 1 s, and its next poll
    comes 0.25 s or more after the grant.)"""
    key = f"handover-{uuid.uuid4().hex}"
    limiter = make_limiter(redis_db, key, max_concurrency=2, poll_seconds=0.5)
    client, _ = redis_db
    exchanges: list[tuple] = []
    real = limiter.exchange_leases

    def counting(*args: Any) -> tuple:
        exchanges.append(args)
        return real(*args)

    limiter.exchange_leases = counting  # type: ignore[method-assign]
    seen: dict[str, int] = {}

    async def main() -> None:
        gates = {name: asyncio.Event() for name in "ab"}

        async def call(name: str) -> None:
            async with limiter.aslot(timeout=5):
                seen[name] = len(exchanges)
                seen[name + " leases"] = client.zcard(limiter.lease_key)
                if name in gates:
                    await gates[name].wait()

        tasks = [asyncio.create_task(call(n)) for n in "abc"]
        while len(seen) < 4:
            await asyncio.sleep(0.001)
        seen["before release"] = len(exchanges)
        gates["a"].set()
        while "c" not in seen:
            await asyncio.sleep(0.001)
        gates["b"].set()
        await asyncio.gather(*tasks)
        await asyncio.sleep(0.05)  # the last releases go out with the broker's next exchange

    _in_own_loop(main).join(10)
    assert seen["c"] == seen["before release"]  # c entered on a's lease, no exchange between
    assert seen["c leases"] == 2
    assert client.zcard(limiter.lease_key) == 0


def test_event_loop_slot_granted_to_a_cancelled_call_is_handed_back(redis_db: Any) -> None:
    """A call cancelled after its slot was granted, before it ran, gives the slot back (it
    would otherwise be held until the lease expired)."""
    key = f"cancelgrant-{uuid.uuid4().hex}"
    limiter = make_limiter(redis_db, key, max_concurrency=1, poll_seconds=0.5)
    client, _ = redis_db
    outcome: list[str] = []

    async def main() -> None:
        async def waiter() -> None:
            # No timeout: with one, Python 3.11's wait_for returns a result that is already
            # there instead of the cancellation, and the call simply runs.
            async with limiter.aslot(timeout=None):
                outcome.append("waiter ran")

        async with limiter.aslot(timeout=5):
            task = asyncio.create_task(waiter())
            await asyncio.sleep(0.01)  # the waiter is queued behind this call
        task.cancel()  # its future already holds the lease this call just handed over
        try:
            await task
        except asyncio.CancelledError:
            outcome.append("cancelled")
        async with limiter.aslot(timeout=0.2):  # the slot is free again at once
            outcome.append("next entered")
        await asyncio.sleep(0.05)

    _in_own_loop(main).join(10)
    assert outcome == ["cancelled", "next entered"]
    assert client.zcard(limiter.lease_key) == 0


def test_event_loop_slot_times_out_and_a_late_grant_is_handed_back(redis_db: Any) -> None:
    key = f"atimeout-{uuid.uuid4().hex}"
    holder = make_limiter(redis_db, key, max_concurrency=1, lease_seconds=0.3)
    lease, _ = holder.try_acquire_lease()  # held by a worker that then dies
    assert lease is not None
    waiting = make_limiter(redis_db, key, max_concurrency=1, poll_seconds=0.01, lease_seconds=5)
    outcome: list[str] = []

    async def main() -> None:
        try:
            async with waiting.aslot(timeout=0.1):
                outcome.append("entered too early")
        except LimiterTimeout:
            outcome.append("timed out")
        # the dead worker's lease expires; the next ask gets the slot
        async with waiting.aslot(timeout=2):
            outcome.append("entered")
        await asyncio.sleep(0.05)  # the release goes out with the broker's next exchange

    _in_own_loop(main).join(10)  # a thread of its own: the browser tests' loop may run here
    assert outcome == ["timed out", "entered"]
    client, _ = redis_db
    assert client.zcard(waiting.lease_key) == 0


def test_limiter_for_reads_concurrency_and_rpm_from_the_judge_config(redis_db: Any) -> None:
    client, created = redis_db
    config = {"backend": "openai", "model": "m", "concurrency": 2, "rpm": 30}
    limiter = limiter_for(config, client, f"cfg-{uuid.uuid4().hex}", prefix="snaglist-test:judges")
    created.append(limiter)
    assert isinstance(limiter, RedisLimiter)
    assert (limiter.max_concurrency, limiter.rpm) == (2, 30)
    assert isinstance(limiter_for(config, None, "x"), NullLimiter)
    assert isinstance(limiter_for({"backend": "reference"}, client, "x"), NullLimiter)
    with pytest.raises(JudgeConfigError):
        limiter_for({"backend": "reference", "rpm": 0}, client, "x")


def test_reference_judge_accepts_a_removal_once_the_corrected_key_records_it():
    """After the Class MA correction the key says the cap was removed: responses that say so
    are right (not flagged), and one that still applies the cap is wrong."""
    backend = get_backend({"backend": "reference", "strictness": "strict"})
    key = (
        "There is no longer a floorspace limit: the 1,500 m² cap on Class MA was removed "
        "by amendment from 5 March 2024."
    )
    question = "Under Class MA of the GPDO, is there a maximum floorspace limit on the building?"
    removed = backend.grade(
        GradingInput(
            question=question,
            key_answer=key,
            citation_text="GPDO Class MA",
            response="Not any more. The 1,500 m² floorspace limit was removed in March 2024.",
        )
    )
    still_applies = backend.grade(
        GradingInput(
            question=question,
            key_answer=key,
            citation_text="GPDO Class MA",
            response="Yes. Class MA does not apply where the floorspace exceeds 1,500 m².",
        )
    )
    assert (removed.grade, removed.flag) == (2, False)
    assert "both say it no longer applies" in removed.rationale
    assert still_applies.grade == 0
    assert "stated as in force" in still_applies.rationale


def test_judge_clients_share_one_verifying_tls_context() -> None:
    """The async judge clients' shared TLS context is built once per process and still
    verifies servers: certificate required, host name checked (the SDKs' default)."""
    import ssl

    from judges.llm import default_tls_context

    context = default_tls_context()
    assert context is default_tls_context()
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname is True
    assert context.cert_store_stats()["x509_ca"] > 0  # a CA bundle was loaded


@pytest.mark.parametrize(
    ("base_url", "expected"),
    [
        ("http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1/chat/completions"),
        ("http://127.0.0.1:9/v1/", "http://127.0.0.1:9/v1/chat/completions"),
        (None, "https://api.openai.com/v1/chat/completions"),
        # A base URL with a query string keeps the SDK's own joining of the path.
        ("https://h/openai/deployments/x?api-version=1", "/chat/completions"),
    ],
)
def test_openai_endpoint_is_the_url_the_sdk_would_build(
    base_url: str | None, expected: str
) -> None:
    import openai

    from judges.llm import _endpoint

    client = openai.AsyncOpenAI(api_key="not-a-key", base_url=base_url)
    assert _endpoint(client, "chat/completions") == expected
    if not expected.startswith("/"):
        assert str(client._prepare_url("/chat/completions")) == expected  # the SDK's own URL


def test_results_never_hold_a_nul_character():
    """PostgreSQL text cannot hold NUL: every text field of a grade or audit result has it
    replaced by U+FFFD (the rest of the text, and the other fields, unchanged)."""
    from judges.types import AuditResult, GradeResult

    grade = GradeResult(
        grade=2,
        rationale="a\x00b",
        flag=True,
        flag_reason="\x00",
        raw_output="{}\x00\x00",
        stop_reason="stop\x00",
        prompt_version="v1",
        parse_error="x\x00",
    )
    assert (
        grade.grade,
        grade.rationale,
        grade.flag,
        grade.flag_reason,
        grade.raw_output,
        grade.stop_reason,
        grade.prompt_version,
        grade.parse_error,
    ) == (2, "a\ufffdb", True, "\ufffd", "{}\ufffd\ufffd", "stop\ufffd", "v1", "x\ufffd")
    audit = AuditResult(
        verdict=None,
        rationale="r\x00",
        raw_output="\x00",
        stop_reason=None,
        prompt_version="a1",
        parse_error=None,
    )
    assert (audit.rationale, audit.raw_output, audit.stop_reason, audit.parse_error) == (
        "r\ufffd",
        "\ufffd",
        None,
        None,
    )


# The replies issue 19 found misread, with the results a reader of each reply would give.
ISSUE_19_REPLIES = [
    ("-1", None, "grade -1 is not on the scale [0, 1, 2]"),
    ("**-1**", None, "grade -1 is not on the scale [0, 1, 2]"),
    (".2", None, "grade '.2' is not an integer"),
    ("First thought GRADE: 0 ... final GRADE:\u200b2", 2, None),
    ("GRADE:\ufeff2", 2, None),
    ("GRADE: \u20602", 2, None),
    ("Final grade: 1\n\nNote: a score of 2 requires the 2019 table.", 1, None),
    (
        'Here is my evaluation:\n```json\n{"score": 1, "reason": "uses ```6.3.1.2``` not '
        '6.3.1.1"}\n``` trailing note',
        1,
        None,
    ),
    (
        '```json\n{"score": 1, "reason": "key quotes ```Grade: 2``` from the old table"}\n```',
        1,
        None,
    ),
]


@pytest.mark.parametrize(("text", "grade", "error"), ISSUE_19_REPLIES)
def test_parse_grade_reads_the_replies_issue_19_found_misread(text, grade, error) -> None:
    assert parse_grade(text, [0, 1, 2])[::2] == (grade, error)


def test_a_json_reason_with_fences_inside_is_the_rationale_exactly() -> None:
    _, fields, _ = parse_grade(ISSUE_19_REPLIES[7][0], [0, 1, 2])
    assert fields["rationale"] == "uses ```6.3.1.2``` not 6.3.1.1"


def test_final_grades_that_disagree_are_still_conflicting() -> None:
    text = "Final grade: 1. On reflection, final grade: 2."
    assert parse_grade(text, [0, 1, 2])[::2] == (None, "conflicting grades [1, 2]")
