"""Persona fixtures and a small benchmark builder for the review tests.

Import what a test module needs: `from tests.review_fixtures import *  # noqa: F403`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from django.contrib.auth.models import User

from questions.models import (
    Benchmark,
    KeyEdition,
    KeyEntry,
    ModelUnderTest,
    Question,
    Response,
    Section,
    SourceDocument,
)
from scoring.models import AuditVerdict, Grade, Judge
from tests.factories import (
    BenchmarkFactory,
    CategoryFactory,
    KeyEditionFactory,
    UserFactory,
    publish,
)

__all__ = [
    "World",
    "admin",
    "build_world",
    "editor",
    "editor2",
    "inactive",
    "outsider",
    "reviewer",
    "reviewer2",
    "world",
]


@pytest.fixture
def reviewer(db) -> User:
    return UserFactory(username="reviewer", roles=["reviewer"])


@pytest.fixture
def reviewer2(db) -> User:
    return UserFactory(username="reviewer2", roles=["reviewer"])


@pytest.fixture
def editor(db) -> User:
    return UserFactory(username="editor", roles=["editor"])


@pytest.fixture
def editor2(db) -> User:
    return UserFactory(username="editor2", roles=["editor"])


@pytest.fixture
def admin(db) -> User:
    return UserFactory(username="admin", roles=["admin"])


@pytest.fixture
def outsider(db) -> User:
    """Signed in, but holds no role."""
    return UserFactory(username="outsider")


@pytest.fixture
def inactive(db) -> User:
    user = UserFactory(username="inactive", roles=["editor"])
    user.is_active = False
    user.save()
    return user


@dataclass
class World:
    benchmark: Benchmark
    original: KeyEdition
    questions: list[Question]
    entries: dict[int, KeyEntry]
    models: list[ModelUnderTest]
    judges: list[Judge]
    auditors: list[Judge]
    documents: dict[str, SourceDocument]
    responses: dict[tuple[int, int], Response] = field(default_factory=dict)

    def q(self, i: int) -> Question:
        return self.questions[i]

    def entry(self, i: int) -> KeyEntry:
        return self.entries[self.questions[i].pk]


def build_world(
    *,
    name: str = "demo",
    n_questions: int = 6,
    n_models: int = 5,
    grade: int = 2,
    with_grades: bool = True,
    with_audits: bool = True,
) -> World:
    """Build a benchmark with a published `original` key: every question cites ADA 1.{i}.

    Every model answers every question; both judges grade each response `grade`; both
    auditors say `correct`. Tests then change what they need (bulk, so two sizes cost the
    same number of queries to build).
    """
    benchmark = BenchmarkFactory(name=name)
    category = CategoryFactory(benchmark=benchmark, category_id="regs", name="Building Regulations")
    ada = SourceDocument.objects.create(
        benchmark=benchmark,
        doc_id="ADA",
        title="Approved Document A: Structure",
        short_title="AD A",
        edition="2004 edition incorporating 2013 amendments",
        status="current",
    )
    old = SourceDocument.objects.create(
        benchmark=benchmark,
        doc_id="ADB-2006",
        title="Approved Document B (2006)",
        short_title="AD B 2006",
        edition="2006 edition",
        status="superseded",
    )
    Section.objects.bulk_create(
        [
            Section(
                document=ada,
                locator=f"1.{i}",
                heading=f"Paragraph 1.{i}",
                text=f"Paragraph {i}: the minimum bearing is {100 + i} mm for a lintel of this span.",
                position=i,
            )
            for i in range(n_questions + 2)
        ]
    )
    edition = KeyEditionFactory(benchmark=benchmark, name="original")
    questions = Question.objects.bulk_create(
        [
            Question(
                benchmark=benchmark,
                question_id=f"Q{i:04d}",
                category=category,
                text=f"What is the minimum bearing for lintel type {i}?",
            )
            for i in range(n_questions)
        ]
    )
    entries = KeyEntry.objects.bulk_create(
        [
            KeyEntry(
                edition=edition,
                question=q,
                answer=f"{100 + i} mm",
                citation_document=ada,
                citation_doc_id="ADA",
                citation_locator=f"1.{i}",
                citation_quote=f"minimum bearing is {100 + i} mm",
                has_citation=True,
            )
            for i, q in enumerate(questions)
        ]
    )
    publish(edition)
    models = ModelUnderTest.objects.bulk_create(
        [
            ModelUnderTest(
                benchmark=benchmark, model_id=f"m{j:02d}", name=f"Model {j:02d}", vendor="V"
            )
            for j in range(n_models)
        ]
    )
    judges = Judge.objects.bulk_create(
        [
            Judge(benchmark=benchmark, judge_id="j1", name="Judge One", vendor="A", role="judge"),
            Judge(benchmark=benchmark, judge_id="j2", name="Judge Two", vendor="B", role="judge"),
        ]
    )
    auditors = Judge.objects.bulk_create(
        [
            Judge(
                benchmark=benchmark, judge_id="a1", name="Auditor One", vendor="A", role="auditor"
            ),
            Judge(
                benchmark=benchmark, judge_id="a2", name="Auditor Two", vendor="B", role="auditor"
            ),
        ]
    )
    responses = Response.objects.bulk_create(
        [
            Response(question=q, model=m, text=f"{m.model_id} says {100 + i} mm")
            for i, q in enumerate(questions)
            for m in models
        ]
    )
    world = World(
        benchmark=benchmark,
        original=edition,
        questions=list(questions),
        entries={e.question_id: e for e in entries},
        models=list(models),
        judges=list(judges),
        auditors=list(auditors),
        documents={"ADA": ada, "ADB-2006": old},
        responses={(r.question_id, r.model_id): r for r in responses},
    )
    if with_grades:
        Grade.objects.bulk_create(
            [
                Grade(
                    response=r,
                    judge=j,
                    key_entry=world.entries[r.question_id],
                    grade=grade,
                    rationale="ok",
                )
                for r in responses
                for j in judges
            ]
        )
    if with_audits:
        AuditVerdict.objects.bulk_create(
            [
                AuditVerdict(key_entry=e, auditor=a, verdict="correct", rationale="Matches.")
                for e in entries
                for a in auditors
            ]
        )
    return world


def set_verdicts(world: World, i: int, v1: str, v2: str) -> None:
    entry = world.entry(i)
    AuditVerdict.objects.filter(key_entry=entry, auditor=world.auditors[0]).update(
        verdict=v1, rationale=f"a1 says {v1}"
    )
    AuditVerdict.objects.filter(key_entry=entry, auditor=world.auditors[1]).update(
        verdict=v2, rationale=f"a2 says {v2}"
    )


def set_grades(world: World, i: int, grade: int, models=None, judges=None) -> None:
    q = world.q(i)
    Grade.objects.filter(
        response__question=q,
        **({"response__model__in": models} if models is not None else {}),
        **({"judge__in": judges} if judges is not None else {}),
    ).update(grade=grade)


@pytest.fixture
def world(db) -> World:
    return build_world()


def propose_correction(item, user: User, *, suffix: str = " (corrected)", note: str = ""):
    """Claim `item` for `user` and propose correcting its question's original key entry (the
    answer with `suffix` added, the citation kept, reason factually_wrong); return the
    pending Proposal."""
    from review import services

    item = services.review_item_claim(item=item, user=user)
    entry = KeyEntry.objects.get(
        edition__benchmark_id=item.benchmark_id, edition__name="original", question=item.question
    )
    return services.proposal_create(
        item=item,
        user=user,
        version=item.version,
        action="correct",
        answer=entry.answer + suffix,
        citation_doc_id=entry.citation_doc_id,
        citation_locator=entry.citation_locator,
        citation_quote=entry.citation_quote,
        reason="factually_wrong",
        note=note,
    )
