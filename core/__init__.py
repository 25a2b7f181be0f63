"""The bottom layer: the audit log, its action vocabulary and the user roles.

Every other app of ours may import core; core imports none of them (import-linter).
"""
