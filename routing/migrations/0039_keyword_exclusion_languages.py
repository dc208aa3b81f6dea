"""A keyword's exclusions may be limited to languages (``Keyword.exclusion_languages``). Existing exclusions get none:
they cancel in every language, as before."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('routing', '0038_keyword_languages'),
    ]

    operations = [
        migrations.AddField(
            model_name='keyword',
            name='exclusion_languages',
            field=models.JSONField(blank=True, default=dict, help_text='The languages an exclusion cancels the keyword in ({"me conta": ["pt"]}): in a message that reads as another language the phrase cancels nothing; an exclusion not named here cancels in every language.'),
        ),
    ]
