"""Key-error detectors that triage runs (issue 17): each turns data into evidence details.

Each module exposes one function that returns [(question pk, evidence detail)] without
writing; review.triage.findings adds the edition name and files them under the detector's
review.models.Source kind. The maths lives in engine (pure), the answer extraction
in judges (pure); these modules only adapt rows to it.
"""
