"""Import steps for a bundle's history (issue 21 item 7): the users it names, who
published each key edition and when, the judges' backend settings and the audit log.

Users travel by user name only: a name the database lacks becomes a new INACTIVE user with
an unusable password and no role (an administrator may activate it). The audit log is
append-only: import inserts the entries it does not hold yet and never changes one.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model

from core.bundle_parts import Target
from core.services import audit_log_restore
from interchange.bundles.history_read import AUDIT_LOG, JUDGE_SETTINGS, PUBLICATIONS
from interchange.bundles.import_base import ImportBase
from questions.models import KeyEdition, KeyEntry
from scoring.models import Judge

JUDGE_SETTING_FIELDS = ("base_url", "api_key_env", "backend_settings", "active")


class HistorySteps(ImportBase):
    """The steps that write the users, publications, judge settings and audit log."""

    def _users(self) -> None:
        """Resolve every user name the history files give into `self.users` (name -> user),
        creating the missing ones inactive."""
        d = self.d
        names = {p["published_by"] for p in d.publications.values()}
        names |= {row["actor"] for row in d.audit_log}
        for part, payload in d.parts:
            names |= part.user_names(payload)
        names.discard("")
        names.discard(None)
        user_model = get_user_model()
        field = user_model.USERNAME_FIELD
        self.users: dict[str, Any] = {
            getattr(u, field): u for u in user_model.objects.filter(**{f"{field}__in": names})
        }
        for name in sorted(names - set(self.users)):
            user = user_model(**{field: name}, is_active=False)
            user.set_unusable_password()
            user.save()
            self.users[name] = user
            self.created["users"] += 1

    def _publication(self, name: str) -> tuple[Any, Any]:
        """Return (published_at, published_by user or None) the bundle gives for edition
        `name`, or (None, None) when it gives none."""
        pub = self.d.publications.get(name)
        if pub is None:
            return None, None
        return pub["published_at"], self.users.get(pub["published_by"] or "")

    def _check_publication(self, edition: KeyEdition) -> None:
        """Warn when a stored edition's publication differs from the bundle's (kept as stored)."""
        pub = self.d.publications.get(edition.name)
        if pub is None:
            return
        at, by = self._publication(edition.name)
        if edition.published_at != at or edition.published_by_id != getattr(by, "pk", None):
            self.warnings.append(
                f"{PUBLICATIONS}:{pub['line']}: warning: key edition {edition.name!r} is "
                "recorded as published at another time or by another user in the database; "
                "kept as stored"
            )

    def _judge_settings(self) -> None:
        """Set the settings of the judges this import created; warn where a stored judge's
        differ (the product may have changed them since). A stored judge is never changed,
        so a re-import cannot move an activated judge to another address or key variable,
        nor activate one; a judge that calls an API is set inactive whatever the bundle
        says (the reader has already refused a base_url or api_key_env the settings'
        EndpointPolicy does not allow)."""
        for jid, given in self.d.judge_settings.items():
            values = {f: given[f] for f in JUDGE_SETTING_FIELDS}
            if jid in self.new_judges:
                # Never active when it calls an API: only an admin activates it (issue 26).
                calling = self.d.judges[jid]["backend"] in Judge.CALLING_BACKENDS
                values["active"] = values["active"] and not calling
                Judge.objects.filter(pk=self.judge_pk[jid]).update(**values)
                self.created["judge_settings"] += 1
                continue
            stored = Judge.objects.filter(pk=self.judge_pk[jid]).values(*JUDGE_SETTING_FIELDS)
            if stored.first() != values:
                self.warnings.append(
                    f"{JUDGE_SETTINGS}:{given['line']}: warning: judge {jid!r} has other "
                    "backend settings in the database; kept as stored"
                )

    def _audit_log(self) -> None:
        """Insert the bundle's audit log entries the database does not hold yet."""
        rows = [
            {
                **{k: v for k, v in row.items() if k not in ("line", "actor")},
                "target_label": row["target_label"] or "",
                "benchmark_name": self.bench.name,
                "actor": self.users.get(row["actor"] or ""),
            }
            for row in self.d.audit_log
        ]
        self.created["audit_log"] += audit_log_restore(rows)

    def _parts(self) -> None:
        """Let each registered bundle part (interchange.bundles.parts) write its rows."""
        if not self.d.parts:
            return
        entries = {
            (ed, qid): pk
            for ed, qid, pk in KeyEntry.objects.filter(
                edition__in=list(self.editions.values())
            ).values_list("edition__name", "question__question_id", "pk")
        }
        target = Target(
            self.bench,
            dict(self.question_pk),
            lambda edition, qid: entries.get((edition, qid)),
            dict(self.users),
        )
        for part, payload in self.d.parts:
            for label, count in part.write(payload, target, self.p.add).items():
                self.created[label] = self.created.get(label, 0) + count


__all__ = ["AUDIT_LOG", "HistorySteps"]
