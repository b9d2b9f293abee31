"""ClaimExplanation: a namespace user's request to gpu-dra-controller to explain one of their claims.

Why a request object and not a command that reads the cluster: the explanation needs every
ResourceSlice (about 200 MB of JSON at 1,000 nodes of 8 cards) and the compiled pools, which
gpu-dra-controller already holds; a CLI that reads them itself takes 12-32 s and ~600 MiB. A
namespaced object is authorised by RBAC on the user's own namespace (``create`` comes with the
``edit`` role), needs no certificates or aggregated API, and the controller answers from its
caches in ``status`` (docs/allocator.md#explain-served-by-the-controller).

``spec`` is the explain command's flags; the claim is named in the object's own namespace only,
so nobody can ask about another namespace's claim. ``status`` is written once, by the controller:
``observedGeneration`` says which spec the answer is for, ``report`` is the same text
``gpu-dra-controller explain`` prints, bounded to :data:`MAX_REPORT_BYTES` (a cut report ends with
a line that says so). The controller deletes an answered object after its TTL, and the object
carries an ownerReference to the claim, so it also goes when the claim does.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, ClassVar, Final, Literal

from kubernetes.client import V1ObjectMeta
from pydantic import Field

from api.gpu.v1alpha1.common import API_VERSION, ApiModel, Int32, Int64

KIND: Final = "ClaimExplanation"
PLURAL: Final = "claimexplanations"
MAX_REPORT_BYTES: Final = 256 * 1024
"""The largest report stored in ``status.report`` (an object must stay well under etcd's 1.5 MiB,
and a report longer than this is one nobody reads: ``maxDevices`` shortens it)."""
DEFAULT_MAX_DEVICES: Final = 40
CLAIM_NAME_PATTERN: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"

# Bounds of the verdict's data in ``status.causes``. Every list and string has one, so the API
# server can cost the schema and an object stays far below etcd's limit whatever a cluster holds
# (thousands of claims holding the devices of one request); the writer clips to them
# (``pkg.dra.explain.verdict.to_status``), ending a clipped list with "and N more".
MAX_CAUSES: Final = 64
MAX_LISTED: Final = 32
"""Holders, cards, taints, attribute values: the most of each a cause stores."""
MAX_ATTRIBUTES: Final = 16
"""Attributes whose existing values a cause lists."""
MAX_HOLDER_LENGTH: Final = 512  # namespace/name: 63 + 1 + 253, and room for "and N more"
MAX_CARD_LENGTH: Final = 253
MAX_TAINT_LENGTH: Final = 1024  # key (up to 316) = value (63) : effect, since a timestamp
MAX_VALUE_LENGTH: Final = 256  # an attribute value as text (the API's are at most 64)
Holder = Annotated[str, Field(max_length=MAX_HOLDER_LENGTH)]
Card = Annotated[str, Field(max_length=MAX_CARD_LENGTH)]
Taint = Annotated[str, Field(max_length=MAX_TAINT_LENGTH)]
AttributeValues = Annotated[
    list[Annotated[str, Field(max_length=MAX_VALUE_LENGTH)]], Field(max_length=MAX_LISTED)
]


class ExplanationStrategy(StrEnum):
    BEST_FIT = "best-fit"
    FIRST_FIT = "first-fit"


class ExplanationOutcome(StrEnum):
    """What the answer says: the claim can be allocated now, cannot, or could not be explained."""

    ALLOCATABLE = "Allocatable"
    NOT_ALLOCATABLE = "NotAllocatable"
    ERROR = "Error"


class ClaimExplanationSpec(ApiModel):
    claim_name: str = Field(
        min_length=1,
        max_length=253,
        pattern=CLAIM_NAME_PATTERN,
        description="The ResourceClaim to explain, in this object's namespace.",
    )
    strategy: ExplanationStrategy = Field(
        default=ExplanationStrategy.BEST_FIT,
        description="best-fit: how gpu-dra-controller decides; first-fit: the kube-scheduler's order.",
    )
    node: str | None = Field(
        default=None, max_length=253, description="Allocate for this node only (default: any one node)."
    )
    all: bool | None = Field(default=None, description="List every device, also those the selectors reject.")
    max_devices: Int32 = Field(
        default=DEFAULT_MAX_DEVICES, ge=0, le=100_000, description="Devices listed per request (0: no limit)."
    )


class ExplanationFacts(ApiModel):
    """The numbers and names behind a cause's sentence; each kind of cause sets its own."""

    asked: Int32 | None = Field(default=None, description="Devices the request asks for.")
    matching: Int32 | None = Field(default=None, description="Devices in the cluster that match the request.")
    most_on_one_node: Int32 | None = Field(default=None, description="Of those, the most on one node.")
    node: str | None = Field(default=None, max_length=253, description="That node.")
    free_on_one_node: Int32 | None = Field(
        default=None, description="The most matching devices free on one node."
    )
    selector: str | None = Field(
        default=None, max_length=10240, description="The selector no device satisfies."
    )
    owner: str | None = Field(
        default=None, max_length=512, description="Whose selector: class X or claim ns/name."
    )
    values: dict[str, AttributeValues] | None = Field(
        default=None,
        max_length=MAX_ATTRIBUTES,
        description="Per attribute the selector tests, the values that exist.",
    )
    blocked: Int32 | None = Field(
        default=None, description="Matching devices this cause keeps from the request."
    )
    holders: list[Holder] | None = Field(
        default=None,
        max_length=MAX_LISTED,
        description='Claims (namespace/name) holding those devices; a clipped list ends "and N more".',
    )
    hidden_holders: Int32 | None = Field(
        default=None, description="Claims holding them that the asker cannot read."
    )
    cards: list[Card] | None = Field(
        default=None, max_length=MAX_LISTED, description="Cards used by devices of another mode."
    )
    taints: list[Taint] | None = Field(
        default=None,
        max_length=MAX_LISTED,
        description="Taints not tolerated (key=value:Effect since when).",
    )
    constraint: str | None = Field(
        default=None, max_length=64, description="matchAttribute or distinctAttribute."
    )
    attribute: str | None = Field(default=None, max_length=512, description="The constraint's attribute.")
    problem: str | None = Field(
        default=None, max_length=4096, description="What is broken in the claim or class."
    )


class ExplanationCause(ApiModel):
    """One reason the claim is pending, in the user's words, and what would change it."""

    kind: str = Field(
        max_length=64, description="TooFewDevices, NoDeviceMatches, HeldByOthers, ... (stable)."
    )
    request: str | None = Field(
        default=None, max_length=512, description="The request (or request/subrequest)."
    )
    text: str = Field(max_length=4096, description="The cause.")
    remedy: str = Field(max_length=1024, description="What would change it.")
    retry: bool = Field(
        description="Whether a change of capacity (devices freed, added, untainted) would help."
    )
    facts: ExplanationFacts | None = Field(default=None, description="The numbers and names behind the text.")


class ClaimExplanationStatus(ApiModel):
    observed_generation: Int64 | None = Field(
        default=None, ge=0, description="metadata.generation the answer is for."
    )
    outcome: ExplanationOutcome | None = Field(
        default=None, description="Allocatable, NotAllocatable, or Error (the claim could not be explained)."
    )
    reason: str | None = Field(
        default=None,
        max_length=1024,
        description="With outcome Error: why (e.g. the claim does not exist).",
    )
    current_allocation: str | None = Field(
        default=None, max_length=4096, description="The claim's allocation now, when it is already allocated."
    )
    report: str | None = Field(
        default=None,
        max_length=MAX_REPORT_BYTES,
        description="The explanation, as `gpu-dra-controller explain` prints it (cut at 256 KiB, saying so).",
    )
    truncated: bool | None = Field(default=None, description="The report was cut to fit.")
    retry: bool | None = Field(
        default=None, description="Not allocatable: whether waiting for capacity to change may help."
    )
    causes: list[ExplanationCause] | None = Field(
        default=None,
        max_length=MAX_CAUSES,
        description="Not allocatable: why, cause first (the report's verdict).",
    )
    computed_at: datetime | None = Field(default=None, description="When the controller answered.")


class ClaimExplanation(ApiModel):
    """A request to explain one ResourceClaim of this namespace (answered in ``status``)."""

    KIND: ClassVar[str] = KIND
    PLURAL: ClassVar[str] = PLURAL

    api_version: Literal["gpu.deckhouse.io/v1alpha1"] = Field(
        default=API_VERSION, alias="apiVersion", description="API version of the object."
    )
    kind: Literal["ClaimExplanation"] = Field(default="ClaimExplanation", description="Kind of the object.")
    metadata: V1ObjectMeta = Field(default_factory=V1ObjectMeta, description="Standard object metadata.")
    spec: ClaimExplanationSpec = Field(description="Which claim to explain, and how.")
    status: ClaimExplanationStatus | None = Field(default=None, description="The controller's answer.")
