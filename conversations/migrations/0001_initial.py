"""The conversation store (Conversation, Message, RouteDecisionRecord, ToolCall) moves here from routing; the tables
keep their names and every row stays."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('routing', '0010_conversation_handoff_kinds'),
        ('agents', '0004_profile_delegation_loop_safety_words'),
        ('tenants', '0001_initial'),
    ]

    operations = [
        # The tables stay where they are: only Django's picture of which app owns them changes.
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='Conversation',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('session_id', models.CharField(max_length=200)),
                        ('conversation_key', models.CharField(max_length=400, unique=True)),
                        ('user_id', models.CharField(blank=True, max_length=200)),
                        ('channel', models.CharField(blank=True, max_length=64)),
                        ('state', models.CharField(blank=True, max_length=100)),
                        ('active_specialist', models.CharField(blank=True, max_length=64)),
                        ('active_intent', models.CharField(blank=True, max_length=100)),
                        ('sub_conversation', models.JSONField(blank=True, help_text='The open delegated sub-conversation: specialist, coordinator, initial context, start.', null=True)),
                        ('pending_result', models.JSONField(blank=True, help_text="A finished sub-conversation's result, given to the coordinator once with the next message.", null=True)),
                        ('pending_permission', models.JSONField(blank=True, help_text="The tool call waiting for the user's agreement: tool, specialist, intent, request.", null=True)),
                        ('granted_permissions', models.JSONField(blank=True, default=list, help_text='Tools the user agreed to.')),
                        ('turn_tickets_issued', models.PositiveBigIntegerField(default=0)),
                        ('turn_tickets_done', models.PositiveBigIntegerField(default=0)),
                        ('turn_started_at', models.DateTimeField(blank=True, null=True)),
                        ('ended_at', models.DateTimeField(blank=True, help_text='When the session was last ended via the API.', null=True)),
                        ('message_count', models.PositiveIntegerField(default=0)),
                        ('cohort', models.CharField(blank=True, help_text='Which side of the multi_agent flag answered: multi_agent, single_agent, or blank (not decided).', max_length=16)),
                        ('handoff_kinds', models.PositiveSmallIntegerField(default=0, help_text='The kinds of completed move the conversation has had, one bit each (handoffs.models.KIND_BITS).')),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('updated_at', models.DateTimeField(auto_now=True)),
                        ('profile', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='conversations', to='agents.agentprofile')),
                        ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='conversations', to='tenants.tenant')),
                    ],
                    options={
                        'db_table': 'routing_conversation',
                        'ordering': ['-updated_at'],
                    },
                ),
                migrations.CreateModel(
                    name='Message',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('role', models.CharField(choices=[('user', 'User'), ('assistant', 'Assistant'), ('agent', "Agent (a specialist's part of a supervisor turn)"), ('system', 'System')], max_length=16)),
                        ('agent', models.CharField(blank=True, help_text='Specialist that wrote an assistant message.', max_length=64)),
                        ('content', models.TextField()),
                        ('metadata', models.JSONField(blank=True, default=dict)),
                        ('step', models.PositiveSmallIntegerField(default=0)),
                        ('cohort', models.CharField(blank=True, help_text='Which side of the multi_agent flag answered: multi_agent, single_agent, or blank (not decided).', max_length=16)),
                        ('latency_ms', models.FloatField(blank=True, help_text="An answer: the turn's time in the graph.", null=True)),
                        ('judge_score', models.FloatField(blank=True, help_text="An answer: the rule-based judge's score.", null=True)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('conversation', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='messages', to='conversations.conversation')),
                    ],
                    options={
                        'db_table': 'routing_message',
                        'ordering': ['created_at', 'id'],
                    },
                ),
                migrations.CreateModel(
                    name='RouteDecisionRecord',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('mode', models.CharField(max_length=16)),
                        ('route', models.CharField(max_length=64)),
                        ('agent', models.CharField(max_length=64)),
                        ('intent', models.CharField(max_length=100)),
                        ('confidence', models.FloatField(default=0.0)),
                        ('reason', models.TextField(blank=True)),
                        ('method', models.CharField(max_length=16)),
                        ('next_state', models.CharField(blank=True, max_length=100)),
                        ('handoff', models.BooleanField(default=False)),
                        ('domain', models.CharField(blank=True, max_length=64)),
                        ('mcp_tools', models.JSONField(blank=True, default=list)),
                        ('metadata', models.JSONField(blank=True, default=dict)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('conversation', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='route_decisions', to='conversations.conversation')),
                        ('message', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='conversations.message')),
                    ],
                    options={
                        'verbose_name': 'route decision',
                        'db_table': 'routing_routedecisionrecord',
                        'ordering': ['created_at', 'id'],
                    },
                ),
                migrations.CreateModel(
                    name='ToolCall',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('agent', models.CharField(max_length=64)),
                        ('tool', models.CharField(max_length=100)),
                        ('server', models.CharField(blank=True, max_length=64)),
                        ('arguments', models.JSONField(blank=True, default=dict, help_text='Masked.')),
                        ('status', models.CharField(choices=[('ok', 'OK'), ('error', 'Error'), ('timeout', 'Timeout'), ('invalid_arguments', 'Invalid arguments'), ('unavailable', 'Server unavailable'), ('not_offered', 'Not offered to the specialist'), ('permission_required', "Waiting for the user's permission")], max_length=32)),
                        ('latency_ms', models.FloatField(default=0.0)),
                        ('result', models.JSONField(blank=True, null=True)),
                        ('error', models.TextField(blank=True)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('conversation', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='tool_calls', to='conversations.conversation')),
                        ('message', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='tool_calls', to='conversations.message')),
                    ],
                    options={
                        'db_table': 'routing_toolcall',
                        'ordering': ['created_at', 'id'],
                    },
                ),
                migrations.AddIndex(
                    model_name='conversation',
                    index=models.Index(fields=['tenant', '-updated_at'], name='conversation_tenant_recent'),
                ),
                migrations.AddIndex(
                    model_name='conversation',
                    index=models.Index(fields=['tenant', 'created_at', 'profile', 'cohort'], name='conversation_tenant_window'),
                ),
                migrations.AddIndex(
                    model_name='conversation',
                    index=models.Index(fields=['created_at', 'tenant', 'profile', 'cohort'], name='conversation_window'),
                ),
                migrations.AddIndex(
                    model_name='conversation',
                    index=models.Index(fields=['tenant', 'profile', 'id', 'cohort'], name='conversation_tenant_ids'),
                ),
                migrations.AddIndex(
                    model_name='message',
                    index=models.Index(fields=['conversation', 'created_at'], name='message_conversation_time'),
                ),
                migrations.AddIndex(
                    model_name='message',
                    index=models.Index(condition=models.Q(('role', 'assistant')), fields=['created_at', 'agent', 'cohort', 'latency_ms', 'judge_score', 'conversation'], name='message_answer_window'),
                ),
                migrations.AddIndex(
                    model_name='message',
                    index=models.Index(condition=models.Q(('role', 'user')), fields=['created_at', 'cohort', 'conversation'], name='message_user_window'),
                ),
                migrations.AddIndex(
                    model_name='routedecisionrecord',
                    index=models.Index(fields=['conversation', 'created_at'], name='decision_conversation_time'),
                ),
                migrations.AddIndex(
                    model_name='routedecisionrecord',
                    index=models.Index(fields=['created_at', 'method', 'conversation'], name='decision_window_method'),
                ),
                migrations.AddIndex(
                    model_name='toolcall',
                    index=models.Index(fields=['conversation', 'created_at'], name='toolcall_conversation_time'),
                ),
                migrations.AddIndex(
                    model_name='toolcall',
                    index=models.Index(fields=['tool', 'created_at'], name='toolcall_tool_time'),
                ),
                migrations.AddIndex(
                    model_name='toolcall',
                    index=models.Index(fields=['created_at', 'tool', 'server', 'status', 'latency_ms', 'conversation'], name='toolcall_window'),
                ),
            ],
            database_operations=[],
        ),
    ]
