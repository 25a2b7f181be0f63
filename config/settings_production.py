"""Production settings: the defaults plus HTTPS-only cookies and headers.

DJANGO_SECRET_KEY, DATABASE_URL and REDIS_URL must be set; start-up fails otherwise.
"""

from __future__ import annotations

from config.env import flag, number

from .settings import *  # noqa: F403
from .settings import env

SECRET_KEY = env.str("DJANGO_SECRET_KEY")
DEBUG = False
SESSION_COOKIE_SECURE = True
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SECURE = True
CSRF_COOKIE_SAMESITE = "Lax"
SECURE_SSL_REDIRECT = flag("DJANGO_SECURE_SSL_REDIRECT", default=True)
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_HSTS_SECONDS = number("DJANGO_HSTS_SECONDS", int, 31536000, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = True
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
