"""Each tenant's own message rates, per API key and per session (blank: the settings')."""

import tenants.rates
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('tenants', '0002_tenant_rights'),
    ]

    operations = [
        migrations.AddField(
            model_name='tenant',
            name='message_rate_per_key',
            field=models.CharField(blank=True, help_text="Messages one API key of this tenant may send, e.g. 6000/minute, or off. One key usually carries all the tenant's customers. Blank: the API_MESSAGE_RATE_PER_KEY setting.", max_length=32, validators=[tenants.rates.rate_validate]),
        ),
        migrations.AddField(
            model_name='tenant',
            name='message_rate_per_session',
            field=models.CharField(blank=True, help_text="Messages one end user's conversation may send (its session; a message without a session counts against its user id), e.g. 60/minute, or off. Blank: the API_MESSAGE_RATE_PER_SESSION setting.", max_length=32, validators=[tenants.rates.rate_validate]),
        ),
    ]
