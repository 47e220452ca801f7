# The limiter's state lives in Redis (production) or in the process (the embedded default):
# the PostgreSQL bucket and slot tables go (provisioning.limiter).

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("provisioning", "0008_onboarding_counts"),
    ]

    operations = [
        migrations.DeleteModel(name="UpstreamSlot"),
        migrations.DeleteModel(name="UpstreamBucket"),
    ]
