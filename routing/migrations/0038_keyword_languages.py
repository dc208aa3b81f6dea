"""A keyword may be limited to languages (``Keyword.languages``). Existing keywords get none: they count in every
language, as before."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('routing', '0037_routing_test_turns'),
    ]

    operations = [
        migrations.AddField(
            model_name='keyword',
            name='languages',
            field=models.JSONField(blank=True, default=list, help_text='The languages the keyword counts in ("pt", "es", "en"): a message that reads as another language does not count it; empty: every language. A message whose language cannot be told counts it.'),
        ),
    ]
