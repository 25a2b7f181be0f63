"""WSGI entry point (gunicorn config.wsgi)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_wsgi_application()

# Warn in the log when the app's database role could undo the immutable key (core/checks.py).
from core.checks import log_database_role_warnings  # noqa: E402

log_database_role_warnings("web")
