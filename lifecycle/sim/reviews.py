"""``kubectl auth can-i`` and ``kubectl auth whoami`` on the embedded API.

The embedded API has no authentication and no authorization: every request
is served. It answers the two self-reviews a client asks about itself as a
real server answers an administrator's: a ``SelfSubjectAccessReview``
(``authorization.k8s.io/v1``) is allowed, whatever it asks, and a
``SelfSubjectReview`` (``authentication.k8s.io/v1``) names :data:`USER`.
Neither is stored; both are served for ``create`` only, as on a real server.
"""

from __future__ import annotations

from typing import Any

from lifecycle.kube.errors import BadRequest
from lifecycle.kube.resources import ResourceType

__all__ = ["ACCESS_REVIEW", "REVIEWS", "SELF_REVIEW", "USER", "answer"]

ACCESS_REVIEW = ResourceType("authorization.k8s.io", "v1", "SelfSubjectAccessReview",
                             "selfsubjectaccessreviews", namespaced=False,
                             status_subresource=False)
SELF_REVIEW = ResourceType("authentication.k8s.io", "v1", "SelfSubjectReview",
                           "selfsubjectreviews", namespaced=False, status_subresource=False)
#: The review kinds: served for ``create`` only, never stored.
REVIEWS = (ACCESS_REVIEW, SELF_REVIEW)
#: Who every client of the embedded API is (an administrator, as with ``lifecycle serve``'s
#: kubeconfig).
USER = {"username": "lifecycle:admin", "groups": ["system:masters", "system:authenticated"]}
_REASON = "the embedded API serves every request (it has no authorization)"


def answer(rtype: ResourceType, body: dict[str, Any]) -> dict[str, Any]:
    """The created review: ``body`` with its ``status`` filled in."""
    meta = dict(body.get("metadata") or {})
    meta.pop("namespace", None)
    out = {"kind": rtype.kind, "apiVersion": rtype.api_version, "metadata": meta}
    if rtype is SELF_REVIEW:
        out["status"] = {"userInfo": dict(USER)}
        return out
    spec = body.get("spec")
    if not isinstance(spec, dict) or not (spec.get("resourceAttributes")
                                          or spec.get("nonResourceAttributes")):
        raise BadRequest("exactly one of nonResourceAttributes or resourceAttributes must be "
                         "specified")
    out["spec"] = spec
    out["status"] = {"allowed": True, "reason": _REASON}
    return out
