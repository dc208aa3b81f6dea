"""The analytics' routes, mounted at the root: the dashboard page and the analytics API.

``platform/urls.py`` includes this module by name: nobody imports the analytics.
"""

from django.urls import path

from analytics import apis, feedback, knowledge, outcomes, rollouts
from analytics.views import DashboardView

urlpatterns = [
    path("analytics/", DashboardView.as_view(), name="analytics-dashboard"),
    path("api/analytics/handoffs", apis.HandoffsApi.as_view(), name="analytics-handoffs"),
    path("api/analytics/handoffs/timeline", apis.HandoffTimelineApi.as_view(), name="analytics-handoffs-timeline"),
    path("api/analytics/handoffs/recent", apis.RecentHandoffsApi.as_view(), name="analytics-handoffs-recent"),
    path("api/analytics/loop-stops", apis.LoopStopsApi.as_view(), name="analytics-loop-stops"),
    path("api/analytics/delegations", apis.DelegationsApi.as_view(), name="analytics-delegations"),
    path("api/analytics/agents", apis.AgentsApi.as_view(), name="analytics-agents"),
    path("api/analytics/routing-methods", apis.RoutingMethodsApi.as_view(), name="analytics-routing-methods"),
    path("api/analytics/tools", apis.ToolsApi.as_view(), name="analytics-tools"),
    path("api/analytics/cohorts", apis.CohortsApi.as_view(), name="analytics-cohorts"),
    path("api/analytics/languages", apis.LanguagesApi.as_view(), name="analytics-languages"),
    path("api/analytics/goals", apis.GoalsApi.as_view(), name="analytics-goals"),
    path("api/analytics/usage", apis.UsageApi.as_view(), name="analytics-usage"),
    path("api/analytics/feedback", feedback.FeedbackApi.as_view(), name="analytics-feedback"),
    path("api/analytics/feedback/timeline", feedback.FeedbackTimelineApi.as_view(), name="analytics-feedback-timeline"),
    path(
        "api/analytics/feedback/breakdown", feedback.FeedbackBreakdownApi.as_view(), name="analytics-feedback-breakdown"
    ),
    path("api/analytics/feedback/recent", feedback.FeedbackRecentApi.as_view(), name="analytics-feedback-recent"),
    path("api/analytics/knowledge/gaps", knowledge.KnowledgeGapsApi.as_view(), name="analytics-knowledge-gaps"),
    path("api/analytics/outcomes", outcomes.OutcomesApi.as_view(), name="analytics-outcomes"),
    path("api/analytics/outcomes/timeline", outcomes.OutcomesTimelineApi.as_view(), name="analytics-outcomes-timeline"),
    path("api/analytics/quality", outcomes.QualityApi.as_view(), name="analytics-quality"),
    *rollouts.urlpatterns,
]
