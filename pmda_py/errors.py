"""PCP error codes (``PM_ERR_*``) and the pmda_py exception tree.

This module imports nothing from :mod:`pmda_py` but :mod:`pmda_py.pcpversion`; every
other layer may import it.
Codes mirror ``pmapi.h`` of PCP 7.x (6.0.3's plus ``ARG``); :func:`errstr`
gives the installed PCP's text (:func:`pmda_py.pcpversion.pcp_version`: 6.1
dropped "log" from the archive errors).
"""

from __future__ import annotations

import enum
import errno
import os

from pmda_py.pcpversion import pcp_version

__all__ = [
    "PM_ERR_BASE",
    "LocalProtocolError",
    "PmErr",
    "PmdaError",
    "PmdaNotReady",
    "UnknownInstance",
    "UnknownMetric",
    "WireFormatError",
    "codename",
    "errstr",
]

PM_ERR_BASE = 12345


class PmErr(enum.IntEnum):
    """``PM_ERR_*`` codes, negative as on the wire."""

    GENERIC = -12345  #: generic error
    PMNS = -12346  #: problems parsing PMNS definitions
    NOPMNS = -12347  #: PMNS not accessible
    DUPPMNS = -12348  #: attempt to reload the PMNS
    TEXT = -12349  #: one-line or help text is not available
    APPVERSION = -12350  #: metric not supported by this version of monitored application
    VALUE = -12351  #: missing metric value(s)
    TIMEOUT = -12353  #: timeout waiting for a response from PMCD
    NODATA = -12354  #: empty archive log file
    RESET = -12355  #: PMCD reset or configuration change
    NAME = -12357  #: unknown metric name
    PMID = -12358  #: unknown or illegal metric identifier
    INDOM = -12359  #: unknown or illegal instance domain identifier
    INST = -12360  #: unknown or illegal instance identifier
    UNIT = -12361  #: illegal pmUnits specification
    CONV = -12362  #: impossible value or scale conversion
    TRUNC = -12363  #: truncation in value conversion
    SIGN = -12364  #: negative value in conversion to unsigned
    PROFILE = -12365  #: explicit instance identifier(s) required
    IPC = -12366  #: IPC protocol failure
    EOF = -12368  #: IPC channel closed
    NOTHOST = -12369  #: operation requires context with host source of metrics
    EOL = -12370  #: end of PCP archive log
    MODE = -12371  #: illegal mode specification
    LABEL = -12372  #: illegal label record at start of a PCP archive log file
    LOGREC = -12373  #: corrupted record in a PCP archive log
    NOTARCHIVE = -12374  #: operation requires context with archive source of metrics
    LOGFILE = -12375  #: missing archive file
    NOCONTEXT = -12376  #: attempt to use an illegal context
    PROFILESPEC = -12377  #: NULL pmInDom with non-NULL instlist
    PMID_LOG = -12378  #: metric not defined in the PCP archive log
    INDOM_LOG = -12379  #: instance domain identifier not defined in the PCP archive log
    INST_LOG = -12380  #: instance identifier not defined in the PCP archive log
    NOPROFILE = -12381  #: missing profile - protocol botch
    NOAGENT = -12386  #: no PMCD agent for domain of request
    PERMISSION = -12387  #: no permission to perform requested operation
    CONNLIMIT = -12388  #: PMCD connection limit for this host exceeded
    AGAIN = -12389  #: try again. Information not currently available
    ISCONN = -12390  #: already connected
    NOTCONN = -12391  #: not connected
    NEEDPORT = -12392  #: port name required
    NONLEAF = -12394  #: metric name is not a leaf in PMNS
    TYPE = -12397  #: unknown or illegal metric type
    THREAD = -12398  #: operation not supported for multi-threaded applications
    NOCONTAINER = -12399  #: container not found
    BADSTORE = -12400  #: bad input to pmstore
    LOGOVERLAP = -12401  #: archives overlap in time
    LOGHOST = -12402  #: archives differ by host
    LOGCHANGETYPE = -12404  #: the type of a metric differs among archives
    LOGCHANGESEM = -12405  #: the semantics of a metric differs among archives
    LOGCHANGEINDOM = -12406  #: the indom of a metric differs among archives
    LOGCHANGEUNITS = -12407  #: the units of a metric differs among archives
    NEEDCLIENTCERT = -12408  #: PMCD requires a client certificate
    BADDERIVE = -12409  #: derived metric definition failed
    NOLABELS = -12410  #: no support for label metadata
    PMDAFENCED = -12411  #: PMDA is currently fenced and unable to respond to requests
    RECTYPE = -12412  #: incorrect record type in an archive
    FEATURE = -12413  #: archive feature not supported
    TLS = -12414  #: TLS protocol failure
    ARG = -12415  #: bad function argument (7.x)
    BOTCH = -12442  #: internal inconsistency in PCP library
    TOOSMALL = -12443  #: insufficient elements in list
    TOOBIG = -12444  #: result size exceeded
    FAULT = -12445  #: QA fault injected
    PMDAREADY = -13393  #: PMDA now ready
    PMDANOTREADY = -13394  #: PMDA is not ready to respond to requests
    NYI = -21344  #: functionality not yet implemented


# Messages exactly as PCP 6.0.3's pmErrStr() prints them (checked against
# ``pmerr -l``; ARG, 7.x only, as in 7.x err.c), used by the dbpmda-compatible
# transcript.
_MESSAGES: dict[int, str] = {
    PmErr.GENERIC: "Generic error, already reported above",
    PmErr.PMNS: "Problems parsing PMNS definitions",
    PmErr.NOPMNS: "PMNS not accessible",
    PmErr.DUPPMNS: "Attempt to reload the PMNS",
    PmErr.TEXT: "One-line or help text is not available",
    PmErr.APPVERSION: "Metric not supported by this version of monitored application",
    PmErr.VALUE: "Missing metric value(s)",
    PmErr.TIMEOUT: "Timeout waiting for a response from PMCD",
    PmErr.NODATA: "Empty archive log file",
    PmErr.RESET: "PMCD reset or configuration change",
    PmErr.NAME: "Unknown metric name",
    PmErr.PMID: "Unknown or illegal metric identifier",
    PmErr.INDOM: "Unknown or illegal instance domain identifier",
    PmErr.INST: "Unknown or illegal instance identifier",
    PmErr.UNIT: "Illegal pmUnits specification",
    PmErr.CONV: "Impossible value or scale conversion",
    PmErr.TRUNC: "Truncation in value conversion",
    PmErr.SIGN: "Negative value in conversion to unsigned",
    PmErr.PROFILE: "Explicit instance identifier(s) required",
    PmErr.IPC: "IPC protocol failure",
    PmErr.EOF: "IPC channel closed",
    PmErr.NOTHOST: "Operation requires context with host source of metrics",
    PmErr.EOL: "End of PCP archive log",
    PmErr.MODE: "Illegal mode specification",
    PmErr.LABEL: "Illegal label record at start of a PCP archive log file",
    PmErr.LOGREC: "Corrupted record in a PCP archive log",
    PmErr.NOTARCHIVE: "Operation requires context with archive source of metrics",
    PmErr.LOGFILE: "Missing PCP archive log file",
    PmErr.NOCONTEXT: "Attempt to use an illegal context",
    PmErr.PROFILESPEC: "NULL pmInDom with non-NULL instlist",
    PmErr.PMID_LOG: "Metric not defined in the PCP archive log",
    PmErr.INDOM_LOG: "Instance domain identifier not defined in the PCP archive log",
    PmErr.INST_LOG: "Instance identifier not defined in the PCP archive log",
    PmErr.NOPROFILE: "Missing profile - protocol botch",
    PmErr.NOAGENT: "No PMCD agent for domain of request",
    PmErr.PERMISSION: "No permission to perform requested operation",
    PmErr.CONNLIMIT: "PMCD connection limit for this host exceeded",
    PmErr.AGAIN: "Try again. Information not currently available",
    PmErr.ISCONN: "Already Connected",
    PmErr.NOTCONN: "Not Connected",
    PmErr.NEEDPORT: "A non-null port name is required",
    PmErr.NONLEAF: "Metric name is not a leaf in PMNS",
    PmErr.TYPE: "Unknown or illegal metric type",
    PmErr.THREAD: "Operation not supported for multi-threaded applications",
    PmErr.NOCONTAINER: "Container not found",
    PmErr.BADSTORE: "Bad input to pmstore",
    PmErr.LOGOVERLAP: "Archives overlap in time",
    PmErr.LOGHOST: "Archives differ by host",
    PmErr.LOGCHANGETYPE: "The type of a metric has changed in an archive",
    PmErr.LOGCHANGESEM: "The semantics of a metric has changed in an archive",
    PmErr.LOGCHANGEINDOM: "The instance domain of a metric has changed in an archive",
    PmErr.LOGCHANGEUNITS: "The units of a metric have changed in an archive",
    PmErr.NEEDCLIENTCERT: "PMCD requires a client certificate",
    PmErr.BADDERIVE: "Derived metric definition failed",
    PmErr.NOLABELS: "No support for metric label metadata",
    PmErr.PMDAFENCED: "PMDA is currently fenced and unable to respond to requests",
    PmErr.RECTYPE: "Incorrect record type in an archive",
    PmErr.FEATURE: "Archive feature not supported",
    PmErr.TLS: "TLS protocol failure",
    PmErr.ARG: "Bad value for function argument",
    PmErr.BOTCH: "Internal inconsistency detected or assertion failed",
    PmErr.TOOSMALL: "Insufficient elements in list",
    PmErr.TOOBIG: "Result size exceeded",
    PmErr.FAULT: "QA fault injected",
    PmErr.PMDAREADY: "PMDA is now responsive to requests",
    PmErr.PMDANOTREADY: "PMDA is not yet ready to respond to requests",
    PmErr.NYI: "Functionality not yet implemented",
}

# PCP 6.1's err.c: "archive log" became "archive" (checked against 7.2.2's
# ``pmerr -l``); ARG was added in 6.0.4 (no 6.0.3 pmerr lists it).
_MESSAGES_7: dict[int, str] = {
    PmErr.NODATA: "Empty archive file",
    PmErr.EOL: "End of PCP archive",
    PmErr.LABEL: "Illegal label record at start of a PCP archive file",
    PmErr.LOGREC: "Corrupted record in a PCP archive",
    PmErr.LOGFILE: "Missing PCP archive file",
    PmErr.PMID_LOG: "Metric not defined in the PCP archive",
    PmErr.INDOM_LOG: "Instance domain identifier not defined in the PCP archive",
    PmErr.INST_LOG: "Instance identifier not defined in the PCP archive",
}


def codename(code: int) -> str:
    """``PM_ERR_X`` for a PCP code, ``-errno`` name for others (for logs)."""
    try:
        return f"PM_ERR_{PmErr(code).name}"
    except ValueError:
        if code < 0 and -code in errno.errorcode:
            return f"-{errno.errorcode[-code]}"
        return str(code)


def errstr(code: int) -> str:
    """Return the text the installed PCP's ``pmErrStr`` gives for ``code``.

    Negative codes outside the PM_ERR range are ``-errno`` and use the C
    library's message, as libpcp does.
    """
    if code in _MESSAGES:
        if code in _MESSAGES_7 and pcp_version() >= (6, 1, 0):
            return _MESSAGES_7[code]
        return _MESSAGES[code]
    if code == 0:
        return "No error"
    if code < 0 and -code < PM_ERR_BASE:
        return os.strerror(-code)
    return f"No such PMAPI error code ({code})"


class PmdaError(Exception):
    """Root of every pmda_py error; carries the PCP code sent on the wire."""

    #: the class's default code; ``PmdaError(code=...)`` overrides it for
    #: that instance (``.code`` and ``.pm_code`` agree)
    code: int = PmErr.GENERIC

    def __init__(self, message: str = "", *, code: int | None = None) -> None:
        if code is not None:
            self.code = code
        super().__init__(message or errstr(self.code))

    @property
    def pm_code(self) -> int:
        """The PCP error code for this error (instance override or class default)."""
        return self.code


class WireFormatError(PmdaError):
    """The peer sent bytes that are not a valid PDU (PM_ERR_IPC)."""

    code = PmErr.IPC


class LocalProtocolError(PmdaError):
    """We were asked to send something illegal (a bug on our side)."""

    code = PmErr.IPC


class UnknownMetric(PmdaError):
    """Unknown PMID (PM_ERR_PMID)."""

    code = PmErr.PMID


class UnknownInstance(PmdaError):
    """Unknown instance (PM_ERR_INST)."""

    code = PmErr.INST


class PmdaNotReady(PmdaError):
    """Raised by a table that cannot answer yet: the daemon replies
    PM_ERR_PMDANOTREADY, awaits the table's ``wait_ready()``, then sends
    PM_ERR_PMDAREADY (pmcd meanwhile answers clients PM_ERR_AGAIN)."""

    code = PmErr.PMDANOTREADY
