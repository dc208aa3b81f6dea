from django.urls import path

from analytics import apis

urlpatterns = [
    path("handoffs", apis.HandoffsApi.as_view(), name="analytics-handoffs"),
    path("handoffs/timeline", apis.HandoffTimelineApi.as_view(), name="analytics-handoffs-timeline"),
    path("handoffs/recent", apis.RecentHandoffsApi.as_view(), name="analytics-handoffs-recent"),
    path("loop-stops", apis.LoopStopsApi.as_view(), name="analytics-loop-stops"),
    path("delegations", apis.DelegationsApi.as_view(), name="analytics-delegations"),
    path("agents", apis.AgentsApi.as_view(), name="analytics-agents"),
    path("routing-methods", apis.RoutingMethodsApi.as_view(), name="analytics-routing-methods"),
    path("tools", apis.ToolsApi.as_view(), name="analytics-tools"),
    path("cohorts", apis.CohortsApi.as_view(), name="analytics-cohorts"),
]
