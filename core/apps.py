from django.apps import AppConfig
from django.db.models.signals import post_migrate


def ensure_role_groups(sender, using="default", **kwargs) -> None:
    """Re-create the role groups after migrate or flush (the data migration runs only once)."""
    from django.contrib.auth.models import Group

    from core.roles import Role

    for role in Role:
        Group.objects.using(using).get_or_create(name=role.value)


class CoreConfig(AppConfig):
    name = "core"
    verbose_name = "Audit log and roles"

    def ready(self) -> None:
        from core import checks  # noqa: F401 - registers the database-role check

        # Django's own signal: the test runner's flush empties the groups table too.
        post_migrate.connect(ensure_role_groups, sender=self, dispatch_uid="snaglist-role-groups")
