"""One error hierarchy; the API maps it to RFC 9457 problem+json in one place."""

from __future__ import annotations

from typing import Any, ClassVar


class InfercostError(Exception):
    """An error a person can act on; `detail` is shown to them as is."""

    status_code: ClassVar[int] = 500
    title: ClassVar[str] = "Internal error"

    def __init__(self, detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.detail = detail
        self.extra = extra


class NotFound(InfercostError):
    """The thing does not exist, or belongs to another team (we do not say which)."""

    status_code = 404
    title = "Not found"


class Conflict(InfercostError):
    """The request clashes with existing state (a name taken, a job already finished)."""

    status_code = 409
    title = "Conflict"


class Gone(InfercostError):
    """The thing existed but is no longer kept (raw samples deleted by retention)."""

    status_code = 410
    title = "Gone"


class InvalidInput(InfercostError):
    """The body is well-formed but its values do not make sense together."""

    status_code = 422
    title = "Invalid input"

    def __init__(self, field: str, detail: str) -> None:
        super().__init__(f"{field}: {detail}", errors=[{"field": field, "message": detail}])


class Unauthorized(InfercostError):
    """No or an unknown credential."""

    status_code = 401
    title = "Unauthorized"


class Forbidden(InfercostError):
    """A valid credential without the right to do this."""

    status_code = 403
    title = "Forbidden"
