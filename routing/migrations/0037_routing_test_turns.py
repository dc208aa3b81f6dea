"""A saved routing test may be a short conversation: the turns played before its message. Existing tests get none
(a single message, as before); ``expect``'s and ``message``'s help say what a conversation holds."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('routing', '0036_rollout_webhook_outbound'),
    ]

    operations = [
        migrations.AlterField(
            model_name='routingtestcase',
            name='message',
            field=models.TextField(help_text="The user's message (in a conversation, its last one)."),
        ),
        migrations.AddField(
            model_name='routingtestcase',
            name='turns',
            field=models.JSONField(blank=True, default=list, help_text='The customer\'s messages before this one, oldest first (at most 10): a list of {"message": …, "expect": {…}}, expect optional; empty for a single message.'),
        ),
        migrations.AlterField(
            model_name='routingtestcase',
            name='expect',
            field=models.JSONField(default=dict, help_text='What the decision must be, e.g. {"intent": "billing_invoice_explanation", "agent": "billing_agent", "method": "keyword"}; keys: intent, agent, method, next_state, goal, status, events, repair, state_after, topics.'),
        ),
    ]
