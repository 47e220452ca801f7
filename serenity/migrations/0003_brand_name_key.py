"""Issue 15 / SPEC §10.2: brand names collide on their NFKC-normalised, case-folded key.

Adds `Brand.name_key`, fills it for every existing row, then moves the live-name partial unique
constraint from `lower(trim(name))` to (organization, name_key). Two live brands of one org
whose names were different before but share a key now (a full-width look-alike) make the last
step fail: an operator renames or deletes one of them and migrates again.
"""

import unicodedata

from django.db import migrations, models


def _key(name):
    # The rule of serenity.names.brand_name_key, frozen here as migrations must be.
    folded = unicodedata.normalize("NFKC", name.strip()).casefold()
    return unicodedata.normalize("NFKC", folded).strip()


def fill_name_keys(apps, schema_editor):
    Brand = apps.get_model("serenity", "Brand")
    for brand in Brand.objects.only("pk", "name").iterator():
        Brand.objects.filter(pk=brand.pk).update(name_key=_key(brand.name))


class Migration(migrations.Migration):
    dependencies = [
        ("serenity", "0002_idempotency_key"),
    ]

    operations = [
        migrations.AddField(
            model_name="brand",
            name="name_key",
            field=models.CharField(default="", editable=False, max_length=400),
            preserve_default=False,
        ),
        migrations.RunPython(fill_name_keys, migrations.RunPython.noop),
        migrations.RemoveConstraint(
            model_name="brand",
            name="uniq_live_brand_name_per_org",
        ),
        migrations.AddConstraint(
            model_name="brand",
            constraint=models.UniqueConstraint(
                models.F("organization"),
                models.F("name_key"),
                condition=models.Q(("status", "deleted"), _negated=True),
                name="uniq_live_brand_name_key_per_org",
            ),
        ),
    ]
