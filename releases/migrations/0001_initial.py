"""The release lifecycle's models move here from routing (routing/0046 removes them there); their tables keep
their names, so nothing in the database moves."""

import common.fields
import common.outbound
import django.core.validators
import django.db.models.deletion
import django.utils.timezone
import routing.rollout_plans
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('agents', '0032_customer_memory_settings'),
        ('routing', '0045_conversation_test_runs'),
        ('tenants', '0005_retention'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        # The tables stay where they are: only Django's picture of which app owns them changes.
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='ConversationTestRun',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('version', models.CharField(help_text='As asked: draft, live or a version number.', max_length=16)),
                        ('version_number', models.PositiveIntegerField(blank=True, help_text='The published version played (blank: the draft).', null=True)),
                        ('compared_with', models.CharField(blank=True, help_text='The version played beside it, if any.', max_length=16)),
                        ('names', models.JSONField(blank=True, default=list, help_text='The tests asked for (empty: every enabled test).')),
                        ('source', models.CharField(choices=[('admin', 'The admin'), ('api', 'The API'), ('command', 'manage.py run_conversation_tests')], max_length=16)),
                        ('status', models.CharField(choices=[('queued', 'Queued'), ('running', 'Running'), ('finished', 'Finished'), ('error', 'Could not run')], default='queued', max_length=16)),
                        ('total', models.PositiveIntegerField(default=0)),
                        ('done', models.PositiveIntegerField(default=0, help_text='Tests played so far.')),
                        ('passed', models.PositiveIntegerField(default=0)),
                        ('failed', models.PositiveIntegerField(default=0)),
                        ('required_failed', models.PositiveIntegerField(default=0)),
                        ('changed', models.PositiveIntegerField(default=0, help_text='Tests whose result or answers differ (a comparison).')),
                        ('usage', models.JSONField(blank=True, default=dict, help_text='The model calls of its turns and judges.')),
                        ('coverage', models.JSONField(blank=True, default=dict)),
                        ('error', models.TextField(blank=True)),
                        ('created_at', models.DateTimeField(auto_now_add=True, db_index=True)),
                        ('started_at', models.DateTimeField(blank=True, null=True)),
                        ('finished_at', models.DateTimeField(blank=True, null=True)),
                        ('profile', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='conversation_test_runs', to='agents.agentprofile')),
                        ('started_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                        ('tenant', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='tenants.tenant')),
                    ],
                    options={
                        'verbose_name': 'conversation test run',
                        'db_table': 'routing_conversationtestrun',
                        'ordering': ['-created_at', '-pk'],
                    },
                ),
                migrations.CreateModel(
                    name='ConversationTestResult',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('name', models.CharField(max_length=200)),
                        ('required', models.BooleanField(default=True)),
                        ('passed', models.BooleanField(default=False)),
                        ('outcome', models.CharField(blank=True, help_text='Against the compared version, if any.', max_length=16)),
                        ('source_message_id', models.PositiveBigIntegerField(blank=True, db_index=True, null=True)),
                        ('result', models.JSONField(default=dict)),
                        ('run', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='results', to='releases.conversationtestrun')),
                    ],
                    options={
                        'db_table': 'routing_conversationtestresult',
                        'ordering': ['passed', 'pk'],
                    },
                ),
                migrations.CreateModel(
                    name='RolloutPlan',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('name', models.CharField(max_length=200)),
                        ('target', models.CharField(choices=[('version', 'A routing version of the profile'), ('multi_agent', 'The multi-agent mode (its rollout flag)')], default='version', max_length=16)),
                        ('stages', models.JSONField(default=routing.rollout_plans.default_rollout_stages, help_text='The share of new conversations the candidate gets at each stage, in percent, rising and ending at 100: e.g. 10, 50, 100.')),
                        ('hold_minutes', models.PositiveIntegerField(default=60, help_text='The least time a stage runs before advancing.')),
                        ('min_conversations', models.PositiveIntegerField(default=200, help_text='The least conversations each cohort needs in a stage before anything moves.')),
                        ('guards', models.JSONField(default=routing.rollout_plans.default_rollout_guards, help_text='What rolls the plan back: per metric, how much worse than the control the candidate may be (relative limit, e.g. 25 % worse) and a level it may never pass (absolute limit); a metric with neither is not guarded.')),
                        ('max_errors', models.PositiveIntegerField(default=20, help_text='Failed specialist parts and tool errors the candidate may have in a stage, absolute.')),
                        ('alpha', models.FloatField(default=0.01, help_text='Significance a rate or score difference needs before it rolls back (one-sided tests).', validators=[django.core.validators.MinValueValidator(0.0001), django.core.validators.MaxValueValidator(0.2)])),
                        ('webhook_url', models.URLField(blank=True, help_text='Optional: each decision that moves the plan is posted here.', validators=[common.outbound.validate_outbound_url])),
                        ('status', models.CharField(choices=[('ready', 'Ready (not started)'), ('running', 'Running'), ('paused', 'Paused (holding its stage)'), ('rolled_back', 'Rolled back'), ('completed', 'Completed'), ('aborted', 'Aborted')], default='ready', max_length=16)),
                        ('stage', models.PositiveSmallIntegerField(default=0, help_text='The running stage (the first is stored as 0 and shown as stage 1).')),
                        ('stage_started_at', models.DateTimeField(blank=True, null=True)),
                        ('history', models.JSONField(blank=True, default=list, help_text='[started at (ISO), percentage] of each stage run, in order: which share of new conversations each moment gave the candidate (a conversation keeps the cohort its start gave it).')),
                        ('started_at', models.DateTimeField(blank=True, null=True)),
                        ('started_as', models.CharField(blank=True, help_text='A fingerprint of its candidate and settings when it started (what a second person approved): it advances and completes only while they are the same.', max_length=64)),
                        ('finished_at', models.DateTimeField(blank=True, null=True)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('candidate', models.ForeignKey(blank=True, help_text="The version rolled out: one made from the profile's draft and not live yet (“Roll out in stages” on the profile's publish page makes it, or tick “make the candidate from the draft” here).", null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='routing.routingversion')),
                        ('control', models.ForeignKey(blank=True, help_text="The version live when the plan started: the control cohort's.", null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='routing.routingversion')),
                        ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                        ('profile', models.ForeignKey(blank=True, help_text='The profile whose version is rolled out; for the multi-agent mode, the profile whose traffic is watched (empty: every profile).', null=True, on_delete=django.db.models.deletion.CASCADE, related_name='rollout_plans', to='agents.agentprofile')),
                    ],
                    options={
                        'db_table': 'routing_rolloutplan',
                        'ordering': ['-created_at', '-id'],
                    },
                ),
                migrations.CreateModel(
                    name='RolloutDecision',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('action', models.CharField(choices=[('start', 'Started'), ('hold', 'Held'), ('advance', 'Advanced'), ('rollback', 'Rolled back'), ('complete', 'Completed'), ('pause', 'Paused'), ('resume', 'Resumed'), ('abort', 'Aborted')], max_length=16)),
                        ('stage', models.PositiveSmallIntegerField()),
                        ('percentage', models.PositiveSmallIntegerField()),
                        ('reason', models.TextField()),
                        ('figures', models.JSONField(blank=True, default=dict, help_text='Per cohort: samples and every guard metric.')),
                        ('actor', models.CharField(help_text='Who decided: the guard, a person in the admin, or someone at the command line.', max_length=200)),
                        ('webhook', models.CharField(blank=True, help_text='How the webhook answered (blank: not sent).', max_length=200)),
                        ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                        ('plan', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='decisions', to='releases.rolloutplan')),
                    ],
                    options={
                        'db_table': 'routing_rolloutdecision',
                        'ordering': ['-created_at', '-id'],
                    },
                ),
                migrations.CreateModel(
                    name='ReleaseRequest',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('kind', models.CharField(choices=[('publish', 'Publish to everyone'), ('rollout', 'Roll out in stages')], max_length=16)),
                        ('status', models.CharField(choices=[('pending', 'Waiting for approval'), ('approved', 'Approved'), ('declined', 'Declined'), ('stale', 'Out of date (the draft or the live version changed)'), ('withdrawn', 'Withdrawn')], default='pending', max_length=16)),
                        ('based_on', models.PositiveIntegerField(blank=True, help_text='The live version when it was requested (none: never published).', null=True)),
                        ('document_hash', models.CharField(blank=True, help_text="A fingerprint of what the requester reviewed: the draft (a publish), or the plan's candidate and settings (a rollout).", max_length=64)),
                        ('note', models.CharField(blank=True, help_text='What changed and why, by the requester.', max_length=300)),
                        ('forced_reason', models.TextField(blank=True, help_text="Why to publish although routing tests fail (the requester's, with the permission).")),
                        ('requested_at', models.DateTimeField(default=django.utils.timezone.now)),
                        ('decided_at', models.DateTimeField(blank=True, null=True)),
                        ('decision_note', models.TextField(blank=True, help_text="The approver's note; a decline says why.")),
                        ('decided_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                        ('profile', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='release_requests', to='agents.agentprofile')),
                        ('requested_by', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                        ('version', models.ForeignKey(blank=True, help_text='The candidate rolled out, or the version the approved publish made.', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='routing.routingversion')),
                        ('plan', models.ForeignKey(blank=True, help_text='The rollout plan to start (a staged rollout).', null=True, on_delete=django.db.models.deletion.CASCADE, related_name='release_requests', to='releases.rolloutplan')),
                    ],
                    options={
                        'verbose_name': 'release request',
                        'db_table': 'routing_releaserequest',
                        'ordering': ['-requested_at', '-id'],
                        'permissions': [('approve_release', 'Can approve publishes and rollout starts')],
                    },
                ),
                migrations.CreateModel(
                    name='RoutingTestCase',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('name', models.CharField(help_text='e.g. fatura alta', max_length=200)),
                        ('message', models.TextField(help_text="The user's message (in a conversation, its last one).")),
                        ('state', models.CharField(blank=True, help_text="The conversation's state, e.g. WAITING_PAYMENT_CONFIRMATION.", max_length=100)),
                        ('active_specialist', models.CharField(blank=True, help_text='The specialist answering the conversation, e.g. billing_agent.', max_length=100)),
                        ('expect', models.JSONField(default=dict, help_text='What the decision must be, e.g. {"intent": "billing_invoice_explanation", "agent": "billing_agent", "method": "keyword"}; keys: intent, agent, method, next_state, goal, status, events, repair, state_after, topics, language.')),
                        ('turns', models.JSONField(blank=True, default=list, help_text='The customer\'s messages before this one, oldest first (at most 10): a list of {"message": …, "expect": {…}}, expect optional; empty for a single message.')),
                        ('enabled', models.BooleanField(default=True, help_text='Disabled tests neither run nor gate publishing.')),
                        ('source_message_id', models.PositiveBigIntegerField(blank=True, db_index=True, null=True)),
                        ('source_intent', models.CharField(blank=True, help_text='The decided intent the test started from.', max_length=100)),
                        ('source_agent', models.CharField(blank=True, help_text='The decided agent the test started from.', max_length=64)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('updated_at', models.DateTimeField(auto_now=True)),
                        ('profile', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='routing_tests', to='agents.agentprofile')),
                    ],
                    options={
                        'verbose_name': 'routing test',
                        'db_table': 'routing_routingtestcase',
                        'ordering': ['profile__agent_id', 'name'],
                        'permissions': [('calibrate_routingtestcase', "Can save a profile's examples-tier calibration to its draft")],
                    },
                ),
                migrations.CreateModel(
                    name='ConversationTest',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('name', models.CharField(help_text='e.g. a high invoice is explained', max_length=200)),
                        ('required', models.BooleanField(default=True, help_text='A failure blocks publishing and rollout stages.')),
                        ('enabled', models.BooleanField(default=True, help_text='Disabled tests neither run nor gate.')),
                        ('language', models.CharField(blank=True, choices=[('pt', 'pt'), ('es', 'es'), ('en', 'en')], help_text="The conversation's language: every answer must be in it unless a turn expects another.", max_length=8)),
                        ('user_id', models.CharField(blank=True, help_text="The customer's id, as a face gives it.", max_length=200)),
                        ('channel', models.CharField(blank=True, help_text="e.g. whatsapp; empty: the API's.", max_length=64)),
                        ('context', models.JSONField(blank=True, default=dict, help_text='What a face sends, e.g. {"msisdn": "5511…"}.')),
                        ('tool_answers', common.fields.OrderedJSONField(blank=True, default=dict, help_text='Recorded answers used in place of calling the tools, e.g. {"consultar_fatura": {"total": 120}}.')),
                        ('turns', common.fields.OrderedJSONField(default=list, help_text='The turns, in order (at most 20): a list of {"user": "…", "expect": {…}}, with an optional "channel", "context" and "tool_answers" each; expect keys: intent, agent, method, next_state, goal, status, events, repair, state_after, topics, language, state, no_state, answer_contains, answer_not_contains, answer_matches, answer_language, answer_schema, answer_min_chars, answer_max_chars, tools_called, tools_not_called, frame_pushed, frame_resumed, escalated, delegated_to, returned, judge.')),
                        ('source_message_id', models.PositiveBigIntegerField(blank=True, db_index=True, null=True)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('updated_at', models.DateTimeField(auto_now=True)),
                        ('profile', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='conversation_tests', to='agents.agentprofile')),
                    ],
                    options={
                        'db_table': 'routing_conversationtest',
                        'ordering': ['profile__agent_id', 'name'],
                        'constraints': [models.UniqueConstraint(fields=('profile', 'name'), name='conversation_test_unique_name_per_profile')],
                    },
                ),
                migrations.AddIndex(
                    model_name='rolloutplan',
                    index=models.Index(fields=['status'], name='rollout_plan_status'),
                ),
                migrations.AddIndex(
                    model_name='rolloutdecision',
                    index=models.Index(fields=['plan', '-created_at'], name='rollout_decision_plan_recent'),
                ),
                migrations.AddIndex(
                    model_name='releaserequest',
                    index=models.Index(fields=['status', 'profile'], name='release_request_status'),
                ),
                migrations.AddConstraint(
                    model_name='routingtestcase',
                    constraint=models.UniqueConstraint(fields=('profile', 'name'), name='routing_test_unique_name_per_profile'),
                ),
            ],
            database_operations=[],
        ),
    ]
