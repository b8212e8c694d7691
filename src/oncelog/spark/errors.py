"""The source's errors: each message is one sentence a data engineer can act on."""

from __future__ import annotations


class SourceError(Exception):
    """The source cannot go on (broker unreachable, timed out reading a range)."""


class SourceOptionError(SourceError, ValueError):
    """A bad option, found on the driver before a query runs."""


class DataLossError(SourceError):
    """Records the query should have read are gone (retention, a deleted or recreated topic)
    and ``failOnDataLoss`` is true."""

    def __init__(self, what: str) -> None:
        super().__init__(f"{what}; some data may have been lost because it is no longer in the "
                         "log. If you want the query to go on regardless, set the option "
                         "failOnDataLoss to false")
