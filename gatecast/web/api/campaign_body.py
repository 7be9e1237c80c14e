"""The typed request body of ``POST /campaigns`` (and its preview) in the OpenAPI document.

The rules of a campaign file have one home, :mod:`campaigns.campaign_file`; this module
only *describes* them for generated clients. The public models are built from the
domain's models: every section (``schedule``, ``pace``, ``audience``, ...) is the domain
model itself, and the message is a union with one model per message kind (``type`` as
its discriminator), each holding the fields :data:`~campaigns.campaign_file.FIELDS_OF`
gives that kind, copied from :class:`~campaigns.campaign_file.MessageSpec`. A client so
gets ``TextMessage``, ``MediaMessage``, ... instead of an untyped object.

The route still validates with :func:`campaigns.campaign_file.parse_campaign` (the
CLI's parser), so its 422 answers stay the campaign file's (``invalid_campaign``, every
problem with its field path): :func:`add_typed_bodies` only puts the schema into the
document.
"""

from __future__ import annotations

from copy import copy
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, create_model
from pydantic.fields import FieldInfo

from campaigns.campaign_file import FIELDS_OF, CampaignSpec, MessageSpec

#: the components' names of the public models are prefixed so they never collide
_REF = "#/components/schemas/{model}"

_KIND_DOCS = {
    "text": "A text message (`text`: a Jinja2 template with spintax).",
    "media": "An image, video, audio or document by URL, with an optional caption.",
    "interactive": "A message with buttons (quick replies, links, calls, copy codes).",
    "template": "A legacy template message with quick-reply buttons.",
    "list": "A list message: a button that opens sections of rows to pick from.",
}


def _copy(info: FieldInfo) -> tuple[Any, FieldInfo]:
    """A field of a domain model as (annotation, field info) for :func:`create_model`."""
    return info.annotation, copy(info)


def _message_model(kind: str) -> type[BaseModel]:
    fields: dict[str, Any] = {"type": (Literal[kind], Field(description="The message kind"))}
    for name in sorted(FIELDS_OF[kind]):
        fields[name] = _copy(MessageSpec.model_fields[name])
    model: type[BaseModel] = create_model(
        f"{kind.capitalize()}Message",
        __config__=ConfigDict(extra="forbid"),
        __doc__=_KIND_DOCS.get(kind, f"A {kind} message."),
        **fields,
    )
    return model


#: one model per message kind, in the order of ``MessageSpec.type``
MESSAGE_MODELS: tuple[type[BaseModel], ...] = tuple(_message_model(k) for k in FIELDS_OF)

Message = Annotated[Union[MESSAGE_MODELS], Field(discriminator="type")]  # type: ignore[valid-type]  # noqa: UP007


def _campaign_model() -> type[BaseModel]:
    fields: dict[str, Any] = {}
    for name, info in CampaignSpec.model_fields.items():
        if name == "message":
            fields[name] = (Message, Field(description="What to send; its fields depend on type"))
        else:
            fields[name] = _copy(info)
    model: type[BaseModel] = create_model(
        "CampaignSpecBody",
        __config__=ConfigDict(extra="forbid"),
        __doc__="A campaign file's fields as JSON (docs/campaign-file.md): the audience "
        "(list, [audience] or groups), the message, and optional schedule, pace, retry and "
        "safety sections.",
        **fields,
    )
    return model


CampaignSpecBody = _campaign_model()

#: (method, path) -> the model its JSON body is described by
TYPED_BODIES: dict[tuple[str, str], type[BaseModel]] = {
    ("post", "/api/v1/campaigns"): CampaignSpecBody,
    ("post", "/api/v1/campaigns/preview"): CampaignSpecBody,
}


def add_typed_bodies(document: dict[str, Any]) -> dict[str, Any]:
    """Put the public models into ``document`` (an OpenAPI document, changed in place) as
    the JSON request bodies of :data:`TYPED_BODIES`."""
    schemas: dict[str, Any] = document.setdefault("components", {}).setdefault("schemas", {})
    for (method, path), model in TYPED_BODIES.items():
        schema = TypeAdapter(model).json_schema(ref_template=_REF, mode="validation")
        for name, sub in {**schema.pop("$defs", {}), model.__name__: schema}.items():
            if schemas.setdefault(name, sub) != sub:
                raise ValueError(f"two different schemas named {name} in the OpenAPI document")
        operation = document["paths"][path][method]
        examples = _examples(operation)
        body: dict[str, Any] = {"schema": {"$ref": _REF.format(model=model.__name__)}}
        if examples:
            body["examples"] = examples
        operation["requestBody"] = {"required": True, "content": {"application/json": body}}
    return document


def _examples(operation: dict[str, Any]) -> dict[str, Any]:
    """The examples the route declared on its untyped body, as named examples."""
    content = operation.get("requestBody", {}).get("content", {}).get("application/json", {})
    found = content.get("schema", {}).get("examples") or []
    return {f"example{i + 1}": {"value": value} for i, value in enumerate(found)}


__all__ = ["MESSAGE_MODELS", "TYPED_BODIES", "CampaignSpecBody", "add_typed_bodies"]
