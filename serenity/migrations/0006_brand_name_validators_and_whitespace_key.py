"""Issue 25 / SPEC §11.4: one validator for names (the model fields carry the API's rule, so the
admin cannot save what the API refuses), and the name key also collapses runs of whitespace.

Recomputes `Brand.name_key` for every row with the new rule. Two live brands of one org whose
names differ only in their whitespace (say "Acme  Inc" and "Acme Inc") would share a key: the
migration then stops before writing anything and names them; an operator renames or deletes
one of them and migrates again.
"""

import re
import unicodedata

from django.db import migrations, models

import serenity.names

_WHITESPACE_RUN = re.compile(r"\s+")


def _key(name):
    # The rule of serenity.names.brand_name_key, frozen here as migrations must be.
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", name).casefold())
    return _WHITESPACE_RUN.sub(" ", folded).strip()


def _old_key(name):
    # 0003's rule, for the way back.
    folded = unicodedata.normalize("NFKC", name.strip()).casefold()
    return unicodedata.normalize("NFKC", folded).strip()


def _recompute(apps, key):
    Brand = apps.get_model("serenity", "Brand")
    rows = list(Brand.objects.values_list("pk", "organization_id", "name", "name_key", "status"))
    live: dict[tuple, list[str]] = {}
    for pk, org_id, name, _, status in rows:
        if status != "deleted":
            live.setdefault((org_id, key(name)), []).append(f"{name!r} ({pk})")
    clashes = [brands for brands in live.values() if len(brands) > 1]
    if clashes:
        raise RuntimeError(
            "live brands of one organization whose names now collide (rename or delete all but "
            "one of each group, then migrate again): "
            + "; ".join(", ".join(brands) for brands in clashes)
        )
    for pk, _, name, current, _ in rows:
        new = key(name)
        if new != current:
            Brand.objects.filter(pk=pk).update(name_key=new)


def recompute_name_keys(apps, schema_editor):
    _recompute(apps, _key)


def restore_name_keys(apps, schema_editor):
    _recompute(apps, _old_key)


class Migration(migrations.Migration):
    dependencies = [
        ("serenity", "0005_scale_limits"),
    ]

    operations = [
        migrations.AlterField(
            model_name="brand",
            name="aliases",
            field=models.JSONField(
                blank=True, default=list, validators=[serenity.names.validate_brand_names]
            ),
        ),
        migrations.AlterField(
            model_name="brand",
            name="name",
            field=models.CharField(
                max_length=200, validators=[serenity.names.validate_brand_name]
            ),
        ),
        migrations.RunPython(recompute_name_keys, restore_name_keys),
    ]
