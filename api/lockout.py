"""The admin login lockout (SPEC §10.5, §11.4, §13.6): django-axes' database handler with three
limits.

- AXES_FAILURE_LIMIT failed logins for one user name from one address lock that pair out (a
  password guessed for one account);
- AXES_ADDRESS_FAILURE_LIMIT failed logins from one address, whatever the user names, lock the
  address out (user names sprayed from one address: each pair alone stays under its limit);
- AXES_USERNAME_FAILURE_LIMIT failed logins for one user name, from any mix of addresses, lock
  the user name out (one account's password guessed from many addresses, e.g. one per address
  of an IPv6 range: each pair and each address alone stays under its limit).

axes compares one number, `get_failures`, with AXES_FAILURE_LIMIT. This handler answers the
pair's count, or the address' or the user name's count scaled to that limit when it is nearer
to its own (`count * pair_limit // own_limit` reaches `pair_limit` exactly when `count` reaches
`own_limit`), so axes' own lockout, cool-off, reset and 429 page apply to all three.
"""

from __future__ import annotations

from typing import Any

from axes.handlers.database import AxesDatabaseHandler
from axes.helpers import get_failure_limit
from django.conf import settings
from django.db.models import Sum
from django.http import HttpRequest


class AdminLoginLockoutHandler(AxesDatabaseHandler):
    """Requires AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"], "ip_address",
    "username"]."""

    def get_failures(self, request: HttpRequest, credentials: dict[str, Any] | None = None) -> int:
        per_pair, per_address, per_name = (
            attempts.aggregate(total=Sum("failures_since_start"))["total"] or 0
            for attempts in self.get_user_attempts(request, credentials)
        )
        pair_limit = get_failure_limit(request, credentials)
        address_limit = max(1, settings.AXES_ADDRESS_FAILURE_LIMIT)
        name_limit = max(1, settings.AXES_USERNAME_FAILURE_LIMIT)
        return max(
            per_pair,
            per_address * pair_limit // address_limit,
            per_name * pair_limit // name_limit,
        )
