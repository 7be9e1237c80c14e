"""Who may call which route: THE role rule of the HTTP app (API, dashboard, /docs, /metrics).

The rule (:func:`required_role`), in order:

1. a route whose template starts with one of :data:`ADMIN_ONLY` needs ``admin``, whatever
   its method: users and their keys, the audit log (reading and export), outbound webhook
   endpoints (their URLs receive every event, their secrets sign them), erasure;
2. a route whose template starts with one of :data:`ADMIN_TO_CHANGE` needs ``admin`` to
   change and ``viewer`` to read: the deployment settings (everyone sees the defaults
   that apply; only admins set them);
3. a dashboard page of :data:`OPERATOR_ONLY` needs ``operator`` (the composer: a form
   only for changing, so a viewer gets a page saying so instead of a form that fails);
4. any other route: ``GET``, ``HEAD`` and ``OPTIONS`` need ``viewer``; every other method
   (``POST``, ``PUT``, ``PATCH``, ``DELETE``) needs ``operator``.

So a route added later is covered without an edit here: a reading route is open to viewers
and a changing one to operators; only a new admin-only area has to be added to
:data:`ADMIN_ONLY` (and ``tests/web/test_access_matrix.py`` checks every route of the built
app against this rule, per role and kind of credential). A GET never changes anything,
which is what makes it safe to open to viewers.

The role a caller acts with is one rule too, whatever the credential
(``campaigns.users.acting_role``): a user's key, and a session opened with it, act with
the lower of the key's role and the user's current role.

Roles and their order are the domain's (``campaigns.users.ROLES``: viewer < operator <
admin); the deployment's owner key (``GATECAST_API_KEY``) acts as ``admin``. Open routes
(no sign-in at all) are not decided here: ``/healthz``, ``/login``, ``/logout``, the static
files, and the gateway's webhook intake (``/webhooks/gateway/{secret}``: its own secret).
A refusal is a 403 problem with the code :data:`ROLE_CODE`.
"""

from __future__ import annotations

from campaigns.users import ROLES, at_least
from gatecast.web.problems import Problem

VIEWER, OPERATOR, ADMIN = ROLES
#: methods that only read: a viewer may call them
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

#: route templates (prefixes) only admins may call, with every method
ADMIN_ONLY: tuple[str, ...] = (
    "/api/v1/users",  # users, their keys (/api/v1/users/{name}/keys, /api/v1/users/keys)
    "/api/v1/audit",  # the audit log and its export
    "/api/v1/webhook-endpoints",  # outbound webhook endpoints, their log, replay
    "/api/v1/contacts/{contact_id}/erase",  # erasure
    "/api/v1/contacts/bulk/erase",  # erasure of chosen contacts
    "/users",  # the dashboard's Users page
    "/audit",  # the dashboard's Audit page
    "/webhooks",  # the dashboard's Webhooks page (not /webhooks/gateway: open, see above)
)
#: route templates (prefixes) every role reads and only admins change
ADMIN_TO_CHANGE: tuple[str, ...] = (
    "/api/v1/settings",  # the deployment's defaults (decision 65)
    "/settings",  # the dashboard's Settings page (its form only for admins)
)
#: dashboard pages only operators (and admins) may open: forms that exist only to change
#: things, which a viewer could fill in but never submit
OPERATOR_ONLY: tuple[str, ...] = ("/campaigns/new",)
#: what a refused page is for, said in its refusal ("viewers cannot create or edit campaigns")
PURPOSES = {"/campaigns/new": "create or edit campaigns"}
#: the stable code of a 403 for a role too low
ROLE_CODE = "role_required"


def _under(template: str, prefix: str) -> bool:
    return template == prefix or template.startswith(prefix + "/")


def required_role(method: str, template: str) -> str:
    """The lowest role that may call ``method`` on the route ``template`` (the route's
    path as declared, e.g. ``/api/v1/campaigns/{campaign_id}/pause``)."""
    if any(_under(template, prefix) for prefix in ADMIN_ONLY):
        return ADMIN
    reading = method.upper() in READ_METHODS
    if any(_under(template, prefix) for prefix in ADMIN_TO_CHANGE):
        return VIEWER if reading else ADMIN
    if template in OPERATOR_ONLY:
        return OPERATOR
    return VIEWER if reading else OPERATOR


def allows(role: str, method: str, template: str) -> bool:
    """Whether ``role`` may call ``method`` on ``template``."""
    return at_least(role, required_role(method, template))


def refusal(role: str, needed: str, actor: str, template: str = "") -> Problem:
    """The 403 for ``actor`` acting as ``role`` on a route that needs ``needed`` (a page
    of :data:`PURPOSES` says what it is for and who can change the role)."""
    purpose = PURPOSES.get(template)
    detail = f"refused: this needs the {needed} role; {actor} acts as {role}"
    if purpose is not None:
        detail = (
            f"A {role} cannot {purpose}: that needs the {needed} role ({actor} acts as "
            f"{role}). An admin can change your role on the Users page."
        )
    return Problem(
        403,
        ROLE_CODE,
        detail,
        title="Your role does not allow this",
        role=role,
        required_role=needed,
    )


__all__ = [
    "ADMIN",
    "ADMIN_ONLY",
    "OPERATOR",
    "OPERATOR_ONLY",
    "READ_METHODS",
    "ROLE_CODE",
    "VIEWER",
    "allows",
    "refusal",
    "required_role",
]
