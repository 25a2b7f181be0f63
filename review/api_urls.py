"""Routes of the review API (see review/api.py), mounted at /api/review/."""

from rest_framework.routers import SimpleRouter

from review import api

router = SimpleRouter()
router.register("items", api.ReviewItemViewSet, basename="api-item")
router.register("proposals", api.ProposalViewSet, basename="api-proposal")
router.register("editions", api.KeyEditionViewSet, basename="api-edition")
router.register("log", api.AuditLogViewSet, basename="api-log")

urlpatterns = router.urls
