"""Routes of the review API (see review/api.py)."""

urlpatterns: list = []
