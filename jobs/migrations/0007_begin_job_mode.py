from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("jobs", "0006_drift_repair_jobs"),
    ]

    operations = [
        migrations.AddField(
            model_name="asyncjob",
            name="mode",
            field=models.CharField(
                choices=[("async", "Async"), ("sync", "Sync")], default="async", max_length=8
            ),
        ),
        migrations.AlterField(
            model_name="asyncjob",
            name="step",
            field=models.CharField(
                choices=[
                    ("provisionWorkspace", "Provision Workspace"),
                    ("createMarket", "Create Market"),
                    ("activateMarkets", "Activate Markets"),
                    ("activateBrandWorkspace", "Activate Brand Workspace"),
                    ("classifyPrompts", "Classify Prompts"),
                    ("repairMarkets", "Repair Markets"),
                    ("deactivateBrand", "Deactivate Brand"),
                ],
                max_length=32,
            ),
        ),
    ]
