"""Signals the data layer sends, for the apps above it to act on (questions/ imports none).

`audit_exclusions_created`: sent inside the transaction that wrote them, with
`key_entry_ids` (list of int: the entries just excluded by rule 4), `reason` (str) and
`user` (the importing user or None for the system). review/ logs each in its audit log,
so an exclusion made by a bundle import is as traceable as one made by triage.
"""

from __future__ import annotations

from django.dispatch import Signal

audit_exclusions_created = Signal()
