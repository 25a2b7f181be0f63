"""`create_demo_users`: users reviewer, editor, editor2 and admin for the demo (`make demo`).

Each run sets a fresh random password per user and prints `username: password` lines on
stdout (nothing else there). With `DEMO_PASSWORD` set in the environment (`make demo
DEMO_PASSWORD=...`) every demo user gets that password instead, the same on every run.
Role changes are written to the audit log.
"""

from __future__ import annotations

import os
import secrets

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand
from django.db import transaction

DEMO_USERS = (
    ("reviewer", "reviewer"),
    ("editor", "editor"),
    ("editor2", "editor"),
    ("admin", "admin"),
)


class Command(BaseCommand):
    help = (
        "Create or update the demo users (reviewer, editor, editor2, admin) with fresh random "
        "passwords, or with the password in the DEMO_PASSWORD environment variable when set."
    )

    def handle(self, *args, **options):
        from core.services import role_change_log

        User = get_user_model()
        fixed = os.environ.get("DEMO_PASSWORD", "")
        lines = []
        with transaction.atomic():
            for username, role in DEMO_USERS:
                user, _ = User.objects.get_or_create(username=username)
                before = list(user.groups.values_list("name", flat=True))
                group, _ = Group.objects.get_or_create(name=role)
                user.groups.set([group])
                user.is_active = True
                user.is_staff = role == "admin"
                user.is_superuser = role == "admin"
                password = fixed or secrets.token_urlsafe(12)
                user.set_password(password)
                user.save()
                role_change_log(actor=None, target_user=user, before=before, after=[role])
                lines.append(f"{username}: {password}")
        self.stdout.write("\n".join(lines))
