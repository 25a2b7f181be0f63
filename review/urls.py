"""Review pages and the review API (mounted under /api/review/)."""

from django.urls import include, path

from review import approval_views, edition_views, human_views, progress_views, views

app_name = "review"

urlpatterns = [
    path("review/", views.queue, name="queue"),
    path("review/next/", views.queue_next, name="next"),
    path("review/items/<int:item_id>/", views.item_detail, name="item"),
    path("review/items/<int:item_id>/claim/", views.item_claim, name="claim"),
    path("review/items/<int:item_id>/release/", views.item_release, name="release"),
    path("review/items/<int:item_id>/renew/", views.item_renew, name="renew"),
    path("review/items/<int:item_id>/reassign/", views.item_reassign, name="reassign"),
    path("review/items/<int:item_id>/check/", views.item_check, name="check"),
    path("review/items/<int:item_id>/propose/", views.item_propose, name="propose"),
    path("review/reports/<int:report_id>/spam/", views.reader_report_spam, name="report-spam"),
    path("review/items/<int:item_id>/decide/", views.item_decide, name="decide"),
    path("review/approvals/", views.approvals, name="approvals"),
    path("review/blind/", human_views.human_index, name="human-index"),
    path("review/blind/draw/", human_views.human_sample_create, name="human-sample-create"),
    path("review/blind/<int:sample_id>/next/", human_views.human_next, name="human-next"),
    path(
        "review/blind/<int:sample_id>/<int:position>/",
        human_views.human_grade,
        name="human-grade",
    ),
    path(
        "review/proposals/approve/",
        approval_views.proposals_approve,
        name="proposals-approve",
    ),
    path(
        "review/proposals/<int:proposal_id>/approve/",
        views.proposal_approve,
        name="proposal-approve",
    ),
    path(
        "review/proposals/<int:proposal_id>/reject/", views.proposal_reject, name="proposal-reject"
    ),
    path("editions/", edition_views.editions_index, name="editions-index"),
    path("editions/<slug:benchmark>/", edition_views.editions, name="editions"),
    path("editions/<slug:benchmark>/<slug:name>/", edition_views.edition_detail, name="edition"),
    path(
        "editions/<slug:benchmark>/<slug:name>/key/", edition_views.edition_key, name="edition-key"
    ),
    path(
        "editions/<slug:benchmark>/<slug:name>/publish/",
        edition_views.edition_publish,
        name="edition-publish",
    ),
    path(
        "editions/<slug:benchmark>/<slug:name>/impact/",
        edition_views.edition_impact,
        name="edition-impact",
    ),
    path(
        "editions/<slug:benchmark>/<slug:name>/preview-rescore/",
        edition_views.edition_preview_rescore,
        name="edition-preview-rescore",
    ),
    path("review/progress/", progress_views.progress_index, name="progress-index"),
    path("review/progress/<slug:benchmark>/", progress_views.progress, name="progress"),
    path("log/", views.log, name="log"),
    path("scorecard/<slug:benchmark>/", views.scorecard, name="scorecard"),
    path("review/report/<slug:benchmark>/", views.report_problem, name="report-problem"),
    path("api/review/", include("review.api_urls")),
]
