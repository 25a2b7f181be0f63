"""questions.trigger_functions.function_sql, split into one builder per family of functions
(issue 29): the statements scoring/0016 runs are the ones it ran before the split."""

from __future__ import annotations

import hashlib

from questions.trigger_functions import function_sql

# sha256 of function_sql('"public"') before the split (commit 843467f), computed then.
BEFORE_SPLIT = "dac32e7f398dd4c41994fde19f86af6cbcb89747f01cc5ad6fd5e8f771a2b022"


def test_the_split_builds_the_same_sql_byte_for_byte():
    sql = function_sql('"public"')
    assert hashlib.sha256(sql.encode()).hexdigest() == BEFORE_SPLIT


def test_every_function_has_the_fixed_search_path_and_its_schema():
    sql = function_sql('"app"')
    assert sql.count("CREATE OR REPLACE FUNCTION") == 7
    assert sql.count('SET search_path = pg_catalog, "app", pg_temp') == 7
    assert "{s}" not in sql and "public" not in sql
