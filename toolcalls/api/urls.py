from django.urls import path

from toolcalls.api import agents, remote, views

urlpatterns = [
    path("operations", views.OperationsView.as_view(), name="api-operations"),
    path("operations/<str:public_id>", views.OperationDetailView.as_view(), name="api-operation"),
    path(
        "operations/<str:public_id>/cancel",
        views.OperationCancelView.as_view(),
        name="api-operation-cancel",
    ),
    path(
        "operations/<str:public_id>/extend",
        views.OperationExtendView.as_view(),
        name="api-operation-extend",
    ),
    path(
        "operations/<str:public_id>/stop",
        views.OperationStopView.as_view(),
        name="api-operation-stop",
    ),
    path(
        "operations/<str:public_id>/fork",
        views.OperationForkView.as_view(),
        name="api-operation-fork",
    ),
    path(
        "operations/<str:public_id>/turns",
        views.OperationTurnsView.as_view(),
        name="api-operation-turns",
    ),
    path(
        "operations/<str:public_id>/calls",
        views.OperationCallsView.as_view(),
        name="api-operation-calls",
    ),
    path(
        "operations/<str:public_id>/calls/<str:call_id>/resolve",
        views.OperationCallResolveView.as_view(),
        name="api-operation-call-resolve",
    ),
    path(
        "operations/<str:public_id>/events",
        views.OperationEventsView.as_view(),
        name="api-operation-events",
    ),
    path(
        "operations/<str:public_id>/events/stream",
        views.OperationEventStreamView.as_view(),
        name="api-operation-event-stream",
    ),
    path(
        "operations/<str:public_id>/messages",
        views.OperationMessagesView.as_view(),
        name="api-operation-messages",
    ),
    path("tools", views.ToolsView.as_view(), name="api-tools"),
    path("tools/<str:name>", views.ToolView.as_view(), name="api-tool"),
    path("remote-servers", remote.RemoteServersView.as_view(), name="api-remote-servers"),
    path("remote-servers/<str:name>", remote.RemoteServerView.as_view(), name="api-remote-server"),
    path(
        "remote-servers/<str:name>/discover",
        remote.RemoteServerDiscoverView.as_view(),
        name="api-remote-server-discover",
    ),
    path(
        "remote-servers/<str:name>/tools",
        remote.RemoteHttpToolsView.as_view(),
        name="api-remote-http-tools",
    ),
    path(
        "remote-servers/<str:name>/tools/<str:remote_name>/enable",
        remote.RemoteToolEnableView.as_view(),
        name="api-remote-tool-enable",
    ),
    path(
        "remote-servers/<str:name>/tools/<str:remote_name>/disable",
        remote.RemoteToolDisableView.as_view(),
        name="api-remote-tool-disable",
    ),
    path("agents", agents.AgentsView.as_view(), name="api-agents"),
    path("agents/<str:name>", agents.AgentDetailView.as_view(), name="api-agent"),
    path(
        "agents/<str:name>/revisions",
        agents.AgentRevisionsView.as_view(),
        name="api-agent-revisions",
    ),
    path(
        "agents/<str:name>/revisions/<str:number>",
        agents.AgentRevisionView.as_view(),
        name="api-agent-revision",
    ),
    path("health/live", views.LivenessView.as_view(), name="api-health-live"),
    path("health/ready", views.ReadinessView.as_view(), name="api-health-ready"),
]
