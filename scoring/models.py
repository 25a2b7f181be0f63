"""Judges and auditors, their grades and audit verdicts, and re-scoring runs."""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import Q

from questions.models import Benchmark, KeyEdition, KeyEntry, Response

# The Judge price columns: (live, batch) x (input, cached input, output), per million tokens.
PRICE_FIELDS = (
    "price_input",
    "price_cached_input",
    "price_output",
    "batch_price_input",
    "batch_price_cached_input",
    "batch_price_output",
)


def _price(help_text: str) -> models.DecimalField:
    """Return a price column: a non-negative Decimal per million tokens, NULL = unknown."""
    return models.DecimalField(
        max_digits=12,
        decimal_places=6,
        null=True,
        blank=True,
        validators=[MinValueValidator(Decimal(0))],
        help_text=help_text + " Empty: unknown.",
    )


class Judge(models.Model):
    """A judge (grades responses) or an auditor (checks key entries).

    `backend` empty means the row only carries imported grades and cannot grade again.
    Secrets are never stored: `api_key_env` names the environment variable to read.
    """

    class Role(models.TextChoices):
        JUDGE = "judge", "Judge"
        AUDITOR = "auditor", "Auditor"

    class Backend(models.TextChoices):
        NONE = "", "None (imported grades only)"
        REFERENCE = "reference", "Reference (offline baseline)"
        OPENAI = "openai", "OpenAI-compatible Chat Completions"
        ANTHROPIC = "anthropic", "Anthropic Messages"

    # The backends that call a vendor's API with a key from the environment: such a judge
    # from a bundle arrives inactive until an admin activates it (issue 26).
    CALLING_BACKENDS = frozenset({"openai", "anthropic"})

    benchmark = models.ForeignKey(Benchmark, on_delete=models.CASCADE, related_name="judges")
    judge_id = models.CharField(max_length=200)
    name = models.CharField(max_length=300)
    vendor = models.CharField(max_length=100, blank=True)
    role = models.CharField(max_length=20, choices=Role.choices, default=Role.JUDGE)
    backend = models.CharField(max_length=20, choices=Backend.choices, blank=True, default="")
    model = models.CharField(max_length=200, blank=True, help_text="The vendor's model name.")
    base_url = models.URLField(max_length=500, blank=True)
    api_key_env = models.CharField(
        max_length=100, blank=True, help_text="Name of the environment variable holding the key."
    )
    prompt_version = models.CharField(max_length=50, default="v1")
    backend_settings = models.JSONField(
        default=dict,
        blank=True,
        help_text="temperature, max_tokens, timeout, strictness, concurrency, rpm ...",
    )
    active = models.BooleanField(
        default=True,
        help_text="Only an active judge is called. A judge that calls an API and came from a "
        "bundle is inactive until an admin activates it (the action 'Activate', which shows its "
        "address and key variable first, or manage.py activate_judge); audit-logged.",
    )
    # Prices per million tokens, set by an admin from the vendor's price page (no built-in
    # list: it would go stale). Empty = unknown, so a cost that needs it is unknown too.
    price_currency = models.CharField(
        max_length=10,
        blank=True,
        help_text="The currency this judge's prices are in (e.g. USD, GBP); costs are "
        "reported in it.",
    )
    price_input = _price("Live price per million input tokens (not read from the cache).")
    price_cached_input = _price("Live price per million input tokens read from the cache.")
    price_output = _price("Live price per million output tokens.")
    batch_price_input = _price("Batch-API price per million input tokens.")
    batch_price_cached_input = _price("Batch-API price per million cached input tokens.")
    batch_price_output = _price("Batch-API price per million output tokens.")

    class Meta:
        ordering = ["benchmark", "role", "judge_id"]
        constraints = [
            models.UniqueConstraint(fields=["benchmark", "judge_id"], name="judge_unique_judge_id"),
            models.CheckConstraint(
                condition=Q(role__in=["judge", "auditor"]), name="judge_role_valid"
            ),
            *(
                models.CheckConstraint(
                    condition=Q(**{f"{name}__isnull": True}) | Q(**{f"{name}__gte": 0}),
                    name=f"judge_{name}_not_negative",
                )
                for name in PRICE_FIELDS
            ),
        ]

    def __str__(self) -> str:
        return f"{self.judge_id} ({self.get_role_display().lower()})"


class PanelMember(models.Model):
    """One judge, at one prompt version, of a benchmark's judge panel (methodology rule 12).

    The panel is the set of judges whose grades make the benchmark's published figures:
    leaderboards, agreement and reports use these judges at these prompt versions unless
    another set is asked for explicitly. A judge added later, or grades under another
    prompt version, change no figure of the panel. Written only by
    `scoring.runs.services.panel.judge_panel_set` (audit-logged).
    """

    benchmark = models.ForeignKey(Benchmark, on_delete=models.CASCADE, related_name="panel")
    judge = models.ForeignKey(Judge, on_delete=models.PROTECT, related_name="panel_seats")
    prompt_version = models.CharField(max_length=50)
    added_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["benchmark", "judge__judge_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["benchmark", "judge"], name="panelmember_unique_judge_per_benchmark"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.judge.judge_id}@{self.prompt_version} on the panel of {self.benchmark}"


class CandidateMember(models.Model):
    """One judge, at one prompt version, of a benchmark's *candidate* panel (issue 31 item 1).

    A candidate panel is what an admin tries before it counts: its figures are shown to
    admins and editors beside the judge panel's and change nothing public. Adopting it
    makes these rows the judge panel (`scoring.runs.services.candidate.candidate_adopt`, which
    writes PanelMember through `judge_panel_set`, audit-logged) and deletes them. Written
    only by `scoring.runs.services.candidate`.
    """

    benchmark = models.ForeignKey(
        Benchmark, on_delete=models.CASCADE, related_name="candidate_panel"
    )
    judge = models.ForeignKey(Judge, on_delete=models.PROTECT, related_name="candidate_seats")
    prompt_version = models.CharField(max_length=50)
    added_at = models.DateTimeField(auto_now_add=True)
    added_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["benchmark", "judge__judge_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["benchmark", "judge"], name="candidatemember_unique_judge_per_benchmark"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.judge.judge_id}@{self.prompt_version} on the candidate panel of {self.benchmark}"


class ScoringRun(models.Model):
    """A re-scoring run (grades) or an audit run (verdicts) for one key edition."""

    class Kind(models.TextChoices):
        GRADE = "grade", "Re-scoring"
        AUDIT = "audit", "Key audit"

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        RUNNING = "running", "Running"
        COMPLETE = "complete", "Complete"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"
        STOPPED = "stopped", "Stopped at budget"

    class Mode(models.TextChoices):
        LIVE = "live", "Live"
        BATCH = "batch", "Batch API"

    benchmark = models.ForeignKey(Benchmark, on_delete=models.CASCADE, related_name="runs")
    edition = models.ForeignKey(KeyEdition, on_delete=models.PROTECT, related_name="runs")
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.GRADE)
    judges = models.ManyToManyField(Judge, related_name="runs")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING)
    needed = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(default=0)
    graded = models.PositiveIntegerField(default=0)
    reused = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    unparsed = models.PositiveIntegerField(default=0)
    mode = models.CharField(
        max_length=10,
        choices=Mode.choices,
        default=Mode.LIVE,
        db_default=Mode.LIVE,
        help_text="live: each call through the vendor's API at once; batch: a model judge's "
        "calls go through its vendor's batch API (half price, results within 24 h).",
    )
    error = models.TextField(blank=True)
    on_complete = models.CharField(
        max_length=200,
        blank=True,
        help_text="Dotted name of a Celery task sent with the run id when the run finishes.",
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    reported_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Last time a worker reported on this run: a task of it began, or its "
        "heartbeat while one runs (SNAGLIST_WORKER_HEARTBEAT_SECONDS).",
    )
    resent_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Last time the periodic heal_runs task sent the stalled run to the workers "
        "again; sent again once its deadline (resends_unanswered) passes with no report.",
    )
    # Issue 26 item 3: a re-send whose task was lost too (a worker killed as it took it, a
    # broker restarted) is sent again after a deadline that doubles per unanswered re-send
    # (scoring.runs.services.tunables.resend_due_at), so healing cannot wedge.
    resend_count = models.PositiveIntegerField(
        default=0,
        db_default=0,
        help_text="Times heal_runs has sent the run to the workers again, in all.",
    )
    resends_unanswered = models.PositiveSmallIntegerField(
        default=0,
        db_default=0,
        help_text="Re-sends since a worker last reported on the run: the backoff's exponent.",
    )
    # A budget (issue 20 item 4; scoring.runs.budget): the run stops before a chunk whose
    # estimated calls would take its spend past a cap. NULL = no cap.
    budget_cost = models.DecimalField(
        max_digits=14,
        decimal_places=6,
        null=True,
        blank=True,
        validators=[MinValueValidator(Decimal(0))],
        help_text="Cost cap, in budget_currency (the judges' price currency).",
    )
    budget_currency = models.CharField(max_length=10, blank=True)
    budget_tokens = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="Token cap: input plus output tokens."
    )
    # What the chunks sending calls now are estimated to spend (scoring.runs.budget): a chunk
    # adds its estimate when admitted and takes it off when its calls are settled.
    budget_reserved_cost = models.DecimalField(max_digits=14, decimal_places=6, default=0)
    budget_reserved_tokens = models.BigIntegerField(default=0)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"run {self.pk} ({self.get_kind_display()}, {self.edition.name}, {self.status})"

    @property
    def progress(self) -> float:
        """Return the fraction of needed pairs finished (0-1); 1 when nothing was needed."""
        return 1.0 if not self.needed else min(1.0, self.done / self.needed)


class RescoreRequest(models.Model):
    """A published key edition's re-scoring, asked for in the publishing transaction (rule 8).

    An outbox row: publishing writes it with the edition and sends `scoring.rescore_requested`
    only after commit, so a broker that is down at that moment never turns a successful
    publish into an error. `started_at` is null until a worker has created the edition's
    re-scoring run (`run`, null when no judge could grade: `note` says why); the periodic
    `scoring.sweep_rescore_requests` sends the task again for requests still waiting, so
    re-scoring starts by itself once the broker is back. One per edition.
    """

    edition = models.OneToOneField(
        KeyEdition, on_delete=models.CASCADE, related_name="rescore_request"
    )
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    requested_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    run = models.ForeignKey(
        ScoringRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    note = models.TextField(blank=True)

    class Meta:
        indexes = [
            models.Index(
                fields=["requested_at"],
                condition=Q(started_at__isnull=True),
                name="rescorerequest_waiting_idx",
            )
        ]

    def __str__(self) -> str:
        state = "started" if self.started_at else "waiting"
        return f"re-scoring request for {self.edition.name} ({state})"

    def is_waiting(self) -> bool:
        """Return True while no worker has started the edition's re-scoring."""
        return self.started_at is None


class Grade(models.Model):
    """One judge's grade of one response against one key entry.

    `grade` is on the benchmark's scale, or null when the judge's output could not be
    parsed (counted as unparsed, never as 0: methodology rule 1).
    """

    # response and key_entry have no index of their own: grade_unique_per_key_and_prompt
    # and grade_entry_judge_idx start with them (two index entries less per grade written).
    response = models.ForeignKey(
        Response, on_delete=models.CASCADE, related_name="grades", db_index=False
    )
    judge = models.ForeignKey(Judge, on_delete=models.PROTECT, related_name="grades")
    key_entry = models.ForeignKey(
        KeyEntry, on_delete=models.PROTECT, related_name="grades", db_index=False
    )
    grade = models.SmallIntegerField(null=True, blank=True)
    rationale = models.TextField(blank=True)
    flag = models.BooleanField(default=False)
    flag_reason = models.TextField(blank=True)
    prompt_version = models.CharField(max_length=50, default="v1")
    raw_output = models.TextField(blank=True)
    stop_reason = models.CharField(max_length=50, blank=True)
    run = models.ForeignKey(
        ScoringRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="grades"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["response", "judge"]
        constraints = [
            models.UniqueConstraint(
                fields=["response", "judge", "key_entry", "prompt_version"],
                name="grade_unique_per_key_and_prompt",
            ),
        ]
        indexes = [models.Index(fields=["key_entry", "judge"], name="grade_entry_judge_idx")]

    def __str__(self) -> str:
        return f"{self.judge.judge_id}: {self.grade} for {self.response}"


class AuditVerdict(models.Model):
    """One auditor's verdict on one key entry (the auditor sees no response)."""

    class Verdict(models.TextChoices):
        CORRECT = "correct", "Correct"
        WRONG = "wrong", "Wrong"
        UNGRADEABLE = "ungradeable", "Ungradeable"

    key_entry = models.ForeignKey(KeyEntry, on_delete=models.PROTECT, related_name="audits")
    auditor = models.ForeignKey(Judge, on_delete=models.PROTECT, related_name="verdicts")
    # NULL means the auditor's output could not be parsed, which is not the same as "".
    verdict = models.CharField(  # noqa: DJ001
        max_length=20, choices=Verdict.choices, null=True, blank=True
    )
    rationale = models.TextField(blank=True)
    prompt_version = models.CharField(max_length=50, default="v1")
    raw_output = models.TextField(blank=True)
    run = models.ForeignKey(
        ScoringRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="verdicts"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["key_entry", "auditor"]
        constraints = [
            models.UniqueConstraint(
                fields=["key_entry", "auditor", "prompt_version"], name="audit_unique_per_prompt"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.auditor.judge_id}: {self.verdict} on {self.key_entry}"

    def is_adverse(self) -> bool:
        """Return True for `wrong` or `ungradeable` (rule 4's adverse verdicts)."""
        return self.verdict in ADVERSE_VERDICTS


# Rule 4: the verdicts that count against a key entry (scoring.audit_rule decides with them).
ADVERSE_VERDICTS = frozenset({AuditVerdict.Verdict.WRONG, AuditVerdict.Verdict.UNGRADEABLE})


class JudgeCall(models.Model):
    """Ledger of every call to a judge backend (one row per attempt), written "started"
    before the call goes out. Only an answered call ("ok": its reply recorded) counts as
    paid; "started" (in flight) and "lost" (in flight at a kill) are "sent, outcome unknown"
    (scoring.runs.costs.UNKNOWN_OUTCOMES): the vendor may or may not have received and billed it."""

    class Outcome(models.TextChoices):
        STARTED = "started", "In flight"
        OK = "ok", "Answered"
        RETRY = "retry", "Transient error, retried"
        FAILED = "failed", "Failed"
        LOST = "lost", "Sent, outcome unknown (in flight at a kill)"

    # run and response have no index of their own: call_run_judge_idx and call_pair_idx
    # start with them (one index less to maintain per ledger row written). On PostgreSQL
    # the table keeps a quarter of each page free (fillfactor 75, migration 0004), so
    # settling a call (outcome and detail: no indexed column) is a HOT update.
    run = models.ForeignKey(
        ScoringRun, on_delete=models.CASCADE, related_name="calls", db_index=False
    )
    judge = models.ForeignKey(Judge, on_delete=models.PROTECT, related_name="calls")
    response = models.ForeignKey(
        Response, null=True, blank=True, on_delete=models.CASCADE, db_index=False
    )
    key_entry = models.ForeignKey(KeyEntry, on_delete=models.PROTECT, related_name="calls")
    prompt_version = models.CharField(max_length=50)
    outcome = models.CharField(max_length=20, choices=Outcome.choices, default=Outcome.STARTED)
    detail = models.TextField(blank=True)
    mode = models.CharField(
        max_length=10,
        choices=ScoringRun.Mode.choices,
        default=ScoringRun.Mode.LIVE,
        db_default=ScoringRun.Mode.LIVE,
        help_text="How the call was sent: live, or in a vendor batch (priced at the judge's "
        "batch prices).",
    )
    # Usage as the vendor reported it (judges.types.Usage); NULL = unknown (the
    # backend reports none, or the call never answered), never 0.
    input_tokens = models.PositiveIntegerField(
        null=True, blank=True, help_text="Prompt tokens billed, cached ones included."
    )
    output_tokens = models.PositiveIntegerField(null=True, blank=True)
    cached_tokens = models.PositiveIntegerField(
        null=True, blank=True, help_text="Prompt tokens read from the vendor's prompt cache."
    )
    cache_write_tokens = models.PositiveIntegerField(
        null=True, blank=True, help_text="Prompt tokens written to the cache (Anthropic)."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "id"]
        indexes = [
            models.Index(fields=["run", "judge"], name="call_run_judge_idx"),
            # A claim looks up its pairs' unfinished earlier calls by (judge, response, key
            # entry, prompt version) (services.ledger.mark_lost_many). Without an index on the
            # whole pair, PostgreSQL combined the judge and key-entry indexes, reading half
            # the ledger per pair: 3-5 ms per claim at 12,000 rows, growing with the table.
            models.Index(
                fields=["response", "judge", "key_entry", "prompt_version"], name="call_pair_idx"
            ),
        ]

    def __str__(self) -> str:
        return f"call {self.pk} {self.judge.judge_id} ({self.outcome})"


class RunItem(models.Model):
    """One pair a run must settle: (response, judge, key entry), or (key entry, auditor).

    The claim of a pair is a conditional update of this row (state pending and no live
    lease), so a duplicate task delivery or a resumed run never counts or pays twice.
    """

    class State(models.TextChoices):
        PENDING = "pending", "Pending"
        GRADED = "graded", "Graded"
        UNPARSED = "unparsed", "Graded, output not parsed"
        REUSED = "reused", "Graded meanwhile by another run"
        FAILED = "failed", "Failed"

    # run has no index of its own: runitem_run_state_idx and the unique pairs start with it.
    # On PostgreSQL the table keeps a quarter of each page free (fillfactor 75, migration
    # 0004), so a claim's UPDATE (lease and attempts: no indexed column) can stay on its page
    # and write no index entry (a HOT update).
    run = models.ForeignKey(
        ScoringRun, on_delete=models.CASCADE, related_name="items", db_index=False
    )
    response = models.ForeignKey(Response, null=True, blank=True, on_delete=models.CASCADE)
    judge = models.ForeignKey(Judge, on_delete=models.PROTECT, related_name="+")
    key_entry = models.ForeignKey(KeyEntry, on_delete=models.PROTECT, related_name="+")
    state = models.CharField(max_length=20, choices=State.choices, default=State.PENDING)
    lease_until = models.DateTimeField(null=True, blank=True)
    holder = models.CharField(
        max_length=200,
        blank=True,
        help_text="The worker process that last claimed the item (host:pid); its heartbeat "
        "renews the lease while the process lives.",
    )
    attempts = models.PositiveSmallIntegerField(default=0)
    detail = models.TextField(blank=True)

    class Meta:
        ordering = ["run", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "response", "judge", "key_entry"],
                condition=Q(response__isnull=False),
                name="runitem_unique_grade_pair",
            ),
            models.UniqueConstraint(
                fields=["run", "judge", "key_entry"],
                condition=Q(response__isnull=True),
                name="runitem_unique_audit_pair",
            ),
        ]
        indexes = [models.Index(fields=["run", "state"], name="runitem_run_state_idx")]

    def __str__(self) -> str:
        return f"run {self.run_id} item {self.pk} ({self.state})"

    def pair(self) -> list[int | None]:
        """Return the JSON-able pair [response id or None, judge id, key entry id]."""
        return [self.response_id, self.judge_id, self.key_entry_id]


class PairLease(models.Model):
    """A pair in flight: held by one run's item until its call settles (issue 19, exactly once
    across runs).

    A pair here is (response, judge, key entry, prompt version), or (auditor, key entry,
    prompt version) for an audit. A unique constraint on the pair means at most one run's
    item holds it at a time; a run whose claim finds the pair held by another run's live
    lease waits for it and reuses the grade when it lands (scoring.runs.services.ledger). The
    row is written when a claim takes the pair, deleted when the pair settles or is
    released; a row whose `lease_until` has passed belongs to a dead worker and may be taken
    over (`previous_run` then names the run it was taken from, and that call counts as lost).
    """

    response = models.ForeignKey(
        Response, null=True, blank=True, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    judge = models.ForeignKey(Judge, on_delete=models.CASCADE, related_name="+", db_index=False)
    key_entry = models.ForeignKey(KeyEntry, on_delete=models.CASCADE, related_name="+")
    prompt_version = models.CharField(max_length=50)
    run = models.ForeignKey(ScoringRun, on_delete=models.CASCADE, related_name="pair_leases")
    item = models.ForeignKey(RunItem, on_delete=models.CASCADE, related_name="+")
    lease_until = models.DateTimeField()
    holder = models.CharField(max_length=200, blank=True, help_text="host:pid of the holder.")
    previous_run = models.ForeignKey(
        ScoringRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["response", "judge", "key_entry", "prompt_version"],
                condition=Q(response__isnull=False),
                name="pairlease_unique_grade_pair",
            ),
            models.UniqueConstraint(
                fields=["judge", "key_entry", "prompt_version"],
                condition=Q(response__isnull=True),
                name="pairlease_unique_audit_pair",
            ),
        ]

    def __str__(self) -> str:
        return f"pair lease of run {self.run_id} item {self.item_id} until {self.lease_until}"


class JudgeBatch(models.Model):
    """One judge's calls sent through its vendor's batch API (issue 20, batch mode).

    Written (status "preparing", with its pairs and their "started" ledger rows) in the
    transaction that claims the pairs, BEFORE the vendor is asked; `vendor_batch_id` is
    recorded once the vendor has accepted it. A "preparing" row whose id is missing after a
    crash is found at the vendor by its tag (scoring.runs.services.batch_mode) before it would be
    sent again. `pairs` maps each request's custom_id to [run item id, ledger row id].
    """

    class Status(models.TextChoices):
        PREPARING = "preparing", "Being submitted"
        SUBMITTED = "submitted", "At the vendor"
        SETTLED = "settled", "Results settled"
        FAILED = "failed", "Refused by the vendor"

    run = models.ForeignKey(ScoringRun, on_delete=models.CASCADE, related_name="batches")
    judge = models.ForeignKey(Judge, on_delete=models.PROTECT, related_name="batches")
    prompt_version = models.CharField(max_length=50)
    vendor = models.CharField(max_length=20, help_text="openai or anthropic.")
    vendor_batch_id = models.CharField(max_length=200, blank=True)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PREPARING)
    vendor_status = models.CharField(
        max_length=50, blank=True, help_text="The vendor's own word for the batch's state."
    )
    requests = models.PositiveIntegerField(default=0)
    counts = models.JSONField(
        default=dict, blank=True, help_text="Results by kind: succeeded, errored, expired, ..."
    )
    pairs = models.JSONField(default=dict, help_text="{custom_id: [run item id, call id]}.")
    polls = models.PositiveIntegerField(default=0)
    detail = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    settled_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["run", "id"]
        indexes = [models.Index(fields=["status"], name="judgebatch_status_idx")]

    def __str__(self) -> str:
        return f"batch {self.pk} of run {self.run_id} ({self.judge_id}, {self.status})"

    @property
    def tag(self) -> str:
        """The batch's idempotency tag, sent to the vendor (OpenAI metadata, every custom_id's
        prefix): "snaglist-b<pk>"."""
        return f"snaglist-b{self.pk}"


# The blind human grading sample (issue 31 item 2) lives in its own module.
from scoring.human_models import HumanGrade, HumanSample, HumanSampleItem  # noqa: E402, F401
