"""A new profile needs a second person when another profile does (``default_release_needs_approval``): the field's
default becomes that rule; no stored row changes."""

from django.db import migrations, models

import agents.models


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0021_examples_calibration_help_text"),
    ]

    operations = [
        migrations.AlterField(
            model_name="agentprofile",
            name="release_needs_approval",
            field=models.BooleanField(
                default=agents.models.default_release_needs_approval,
                help_text="A publish or the start of a staged rollout becomes a request that another person with the "
                "right to approve releases approves; customers are served only a version, never the draft. Only they "
                "(or an administrator) change this setting; a new profile needs a second person when another profile "
                "does.",
                verbose_name="Publishing needs a second person",
            ),
        ),
    ]
