"""Where the links inside a page point. Every link is absolute (on the address people reach
the service at), so a page saved to disk or mailed still reaches the service. A page opened
through a share link keeps the share in its links only where the share covers the target
(the board's sort and window links on a shared board); any other target goes through
sign-in, which sends a signed-in browser straight on."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlencode

#: The definitions of every figure, served by the API (docs/figures.md).
FIGURES_PATH = "/docs/figures.md"


@dataclass(frozen=True, slots=True)
class ThisPage:
    """What a page shows, as a share of it would name it (POST /v1/shares)."""

    page: str
    job_ids: tuple[str, ...] = ()
    window: str | None = None
    all_endpoints: bool = False


@dataclass(frozen=True, slots=True)
class PageLinks:
    """Links of one page: `base` is the service's address (no trailing slash); `share_path`
    the share link it was opened through (`/shared/<token>`), with what that share opens;
    `team` and `session_csrf` are set when a signed-in browser opened it, and `this_page`
    when it may offer to share itself."""

    base: str = ""
    share_path: str | None = None
    share_kind: str | None = None
    share_jobs: tuple[str, ...] = ()
    team: str | None = None
    session_csrf: str | None = None
    this_page: ThisPage | None = None

    def signin(self, next_path: str) -> str:
        """The sign-in page, coming back to `next_path` afterwards."""
        return f"{self.base}/signin?{urlencode({'next': next_path})}"

    def report(self, job_id: object) -> str:
        """A job's report: the share itself when it is that report, else the report's own
        address (through sign-in when the page was opened through a share)."""
        path = f"/v1/jobs/{job_id}/report"
        if self.share_path is None:
            return self.base + path
        if self.share_kind == "report" and self.share_jobs == (str(job_id),):
            return self.base + self.share_path
        return self.signin(path)

    def board(self, query: Mapping[str, str]) -> str:
        """The status board with `query` (window, sort, all)."""
        path = f"/v1/status/page?{urlencode(query)}"
        if self.share_path is None:
            return self.base + path
        if self.share_kind == "status":
            return f"{self.base}{self.share_path}?{urlencode(query)}"
        return self.signin(path)

    @property
    def figures(self) -> str:
        """The page that defines every figure."""
        return self.base + FIGURES_PATH

    @property
    def share_form(self) -> str:
        """Where the "Share this page" form posts."""
        return f"{self.base}/shares/new"

    @property
    def signout(self) -> str:
        """Where the sign-out form posts."""
        return f"{self.base}/signout"
