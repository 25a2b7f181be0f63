from django.apps import AppConfig
from django.db.models.signals import pre_migrate


def refuse_reversing_immutability(sender, plan=None, using="default", **kwargs) -> None:
    """Stop `migrate` before it changes anything if it would reverse an immutability migration
    while a published key edition exists (methodology rule 7).

    `plan` is Django's list of (Migration, backwards) pairs; a migration opts in with the
    class attribute `refused_backwards_while_published = True`. Each such migration's reverse
    also refuses by itself (questions.db_triggers.refuse_while_published); this check comes
    first so that no other migration of the plan is reversed before the refusal. Raises
    django.core.management.CommandError naming the migrations.
    """
    from django.core.management import CommandError
    from django.db import connections

    guarded = [
        f"{migration.app_label}.{migration.name}"
        for migration, backwards in plan or []
        if backwards and getattr(migration, "refused_backwards_while_published", False)
    ]
    if not guarded:
        return
    with connections[using].cursor() as cursor:
        cursor.execute("SELECT count(*) FROM questions_keyedition WHERE status = 'published'")
        (published,) = cursor.fetchone()
    if published:
        raise CommandError(
            f"migrate refused: it would reverse {', '.join(guarded)}, which keep the published "
            f"key immutable, and {published} published key edition(s) exist (methodology rule "
            "7). Nothing was changed."
        )


class QuestionsConfig(AppConfig):
    name = "questions"
    verbose_name = "Benchmark and answer key"

    def ready(self) -> None:
        pre_migrate.connect(
            refuse_reversing_immutability, sender=self, dispatch_uid="snaglist-immutable-key"
        )
