"""The integer constants of PCP's ``cpmapi`` and ``cpmda`` modules, as a
compat script sees them (``import cpmapi as c_api``; ``from cpmda import
PMDA_FETCH_NOVALUES``).

Values are those of PCP's public headers (``<pcp/pmapi.h>``,
``<pcp/pmda.h>``, PCP 6.0.3 on a 64-bit little-endian Linux host, plus
what PCP 7.x added; :func:`cpmapi_for` the installed version's);
tests/compat/test_constants.py compares every one with the real modules.
"""

from __future__ import annotations

__all__ = ["CPMAPI", "CPMDA", "PCP7_CPMAPI", "cpmapi_for"]

CPMAPI: dict[str, int] = {
    # HAVE_BITFIELDS
    "HAVE_BITFIELDS_LTOR": 0,
    "HAVE_BITFIELDS_RTOL": 1,
    # PMAPI
    "PMAPI_VERSION": 3,
    # PMAPI_VERSION
    "PMAPI_VERSION_2": 2,
    "PMAPI_VERSION_3": 3,
    # PMCD_ADD
    "PMCD_ADD_AGENT": 1,
    # PMCD_AGENT
    "PMCD_AGENT_CHANGE": 7,
    # PMCD_DROP
    "PMCD_DROP_AGENT": 4,
    # PMCD_LABEL
    "PMCD_LABEL_CHANGE": 8,
    # PMCD_NAMES
    "PMCD_NAMES_CHANGE": 16,
    # PMCD_NO
    "PMCD_NO_CHANGE": 0,
    # PMCD_RESTART
    "PMCD_RESTART_AGENT": 2,
    # PMNS
    "PMNS_ARCHIVE": 3,
    "PMNS_LOCAL": 1,
    "PMNS_REMOTE": 2,
    # PMNS_LEAF
    "PMNS_LEAF_STATUS": 0,
    # PMNS_NONLEAF
    "PMNS_NONLEAF_STATUS": 1,
    # PM_CONTEXT
    "PM_CONTEXT_ARCHIVE": 2,
    "PM_CONTEXT_HOST": 1,
    "PM_CONTEXT_LOCAL": 3,
    "PM_CONTEXT_TYPEMASK": 255,
    "PM_CONTEXT_UNDEF": -1,
    # PM_COUNT
    "PM_COUNT_ONE": 0,
    # PM_CTXFLAG
    "PM_CTXFLAG_COMPRESS": 2048,
    "PM_CTXFLAG_EXCLUSIVE": 512,
    "PM_CTXFLAG_RELAXED": 4096,
    "PM_CTXFLAG_SECURE": 1024,
    # PM_DEBUG
    "PM_DEBUG_APPL0": 2048,
    "PM_DEBUG_APPL1": 4096,
    "PM_DEBUG_APPL2": 8192,
    # PM_ERR
    "PM_ERR_AGAIN": -12389,
    "PM_ERR_APPVERSION": -12350,
    "PM_ERR_BADDERIVE": -12409,
    "PM_ERR_BADSTORE": -12400,
    "PM_ERR_BOTCH": -12442,
    "PM_ERR_CONNLIMIT": -12388,
    "PM_ERR_CONV": -12362,
    "PM_ERR_DUPPMNS": -12348,
    "PM_ERR_EOF": -12368,
    "PM_ERR_EOL": -12370,
    "PM_ERR_FAULT": -12445,
    "PM_ERR_FEATURE": -12413,
    "PM_ERR_GENERIC": -12345,
    "PM_ERR_INDOM": -12359,
    "PM_ERR_INDOM_LOG": -12379,
    "PM_ERR_INST": -12360,
    "PM_ERR_INST_LOG": -12380,
    "PM_ERR_IPC": -12366,
    "PM_ERR_ISCONN": -12390,
    "PM_ERR_LABEL": -12372,
    "PM_ERR_LOGCHANGEINDOM": -12406,
    "PM_ERR_LOGCHANGESEM": -12405,
    "PM_ERR_LOGCHANGETYPE": -12404,
    "PM_ERR_LOGCHANGEUNITS": -12407,
    "PM_ERR_LOGFILE": -12375,
    "PM_ERR_LOGHOST": -12402,
    "PM_ERR_LOGOVERLAP": -12401,
    "PM_ERR_LOGREC": -12373,
    "PM_ERR_MODE": -12371,
    "PM_ERR_NAME": -12357,
    "PM_ERR_NEEDCLIENTCERT": -12408,
    "PM_ERR_NEEDPORT": -12392,
    "PM_ERR_NOAGENT": -12386,
    "PM_ERR_NOCONTAINER": -12399,
    "PM_ERR_NOCONTEXT": -12376,
    "PM_ERR_NODATA": -12354,
    "PM_ERR_NOLABELS": -12410,
    "PM_ERR_NONLEAF": -12394,
    "PM_ERR_NOPMNS": -12347,
    "PM_ERR_NOPROFILE": -12381,
    "PM_ERR_NOTARCHIVE": -12374,
    "PM_ERR_NOTCONN": -12391,
    "PM_ERR_NOTHOST": -12369,
    "PM_ERR_NYI": -21344,
    "PM_ERR_PERMISSION": -12387,
    "PM_ERR_PMDAFENCED": -12411,
    "PM_ERR_PMDANOTREADY": -13394,
    "PM_ERR_PMDAREADY": -13393,
    "PM_ERR_PMID": -12358,
    "PM_ERR_PMID_LOG": -12378,
    "PM_ERR_PMNS": -12346,
    "PM_ERR_PROFILE": -12365,
    "PM_ERR_PROFILESPEC": -12377,
    "PM_ERR_RECTYPE": -12412,
    "PM_ERR_RESET": -12355,
    "PM_ERR_SIGN": -12364,
    "PM_ERR_TEXT": -12349,
    "PM_ERR_THREAD": -12398,
    "PM_ERR_TIMEOUT": -12353,
    "PM_ERR_TLS": -12414,
    "PM_ERR_TOOBIG": -12444,
    "PM_ERR_TOOSMALL": -12443,
    "PM_ERR_TRUNC": -12363,
    "PM_ERR_TYPE": -12397,
    "PM_ERR_UNIT": -12361,
    "PM_ERR_VALUE": -12351,
    # PM_EVENT
    "PM_EVENT_FLAG_END": 4,
    "PM_EVENT_FLAG_ID": 8,
    "PM_EVENT_FLAG_MISSED": 2147483648,
    "PM_EVENT_FLAG_PARENT": 16,
    "PM_EVENT_FLAG_POINT": 1,
    "PM_EVENT_FLAG_START": 2,
    # PM_ID
    "PM_ID_NULL": 4294967295,
    # PM_INDOM
    "PM_INDOM_NULL": 4294967295,
    # PM_IN
    "PM_IN_NULL": 4294967295,
    # PM_LABEL
    "PM_LABEL_CLUSTER": 8,
    "PM_LABEL_CONTEXT": 1,
    "PM_LABEL_DOMAIN": 2,
    "PM_LABEL_INDOM": 4,
    "PM_LABEL_INSTANCES": 32,
    "PM_LABEL_ITEM": 16,
    "PM_LABEL_OPTIONAL": 128,
    # PM_LOG
    "PM_LOG_MAGIC": 1342514688,
    "PM_LOG_MAXHOSTLEN": 64,
    "PM_LOG_VERS02": 2,
    "PM_LOG_VERS03": 3,
    "PM_LOG_VOL_META": -1,
    "PM_LOG_VOL_TI": -2,
    # PM
    "PM_MAXERRMSGLEN": 128,
    "PM_MAXLABELJSONLEN": 65535,
    "PM_MAXLABELS": 255,
    # PM_MAX
    "PM_MAX_HOSTNAMELEN": 256,
    "PM_MAX_TIMEZONELEN": 256,
    "PM_MAX_ZONEINFOLEN": 256,
    # PM_MODE
    "PM_MODE_BACK": 3,
    "PM_MODE_FORW": 2,
    "PM_MODE_INTERP": 1,
    "PM_MODE_LIVE": 0,
    # PM_NS
    "PM_NS_DEFAULT": 0,
    # PM_OPTFLAG
    "PM_OPTFLAG_BOUNDARIES": 1024,
    "PM_OPTFLAG_DONE": 2,
    "PM_OPTFLAG_ENV_ONLY": 256,
    "PM_OPTFLAG_EXIT": 32,
    "PM_OPTFLAG_INIT": 1,
    "PM_OPTFLAG_LONG_ONLY": 512,
    "PM_OPTFLAG_MIXED": 128,
    "PM_OPTFLAG_MULTI": 4,
    "PM_OPTFLAG_NOFLUSH": 4096,
    "PM_OPTFLAG_POSIX": 64,
    "PM_OPTFLAG_QUIET": 8192,
    "PM_OPTFLAG_RUNTIME_ERR": 16,
    "PM_OPTFLAG_STDOUT_TZ": 2048,
    "PM_OPTFLAG_USAGE_ERR": 8,
    # PM_SEM
    "PM_SEM_COUNTER": 1,
    "PM_SEM_DISCRETE": 4,
    "PM_SEM_INSTANT": 3,
    # PM_SIZEOF
    "PM_SIZEOF_SUSECONDS_T": 8,
    "PM_SIZEOF_TIME_T": 8,
    # PM_SPACE
    "PM_SPACE_BYTE": 0,
    "PM_SPACE_EBYTE": 6,
    "PM_SPACE_GBYTE": 3,
    "PM_SPACE_KBYTE": 1,
    "PM_SPACE_MBYTE": 2,
    "PM_SPACE_PBYTE": 5,
    "PM_SPACE_TBYTE": 4,
    "PM_SPACE_YBYTE": 8,
    "PM_SPACE_ZBYTE": 7,
    # PM_TEXT
    "PM_TEXT_DIRECT": 16,
    "PM_TEXT_HELP": 2,
    "PM_TEXT_INDOM": 8,
    "PM_TEXT_ONELINE": 1,
    "PM_TEXT_PMID": 4,
    # PM_TIME
    "PM_TIME_HOUR": 5,
    "PM_TIME_MIN": 4,
    "PM_TIME_MSEC": 2,
    "PM_TIME_NSEC": 0,
    "PM_TIME_SEC": 3,
    "PM_TIME_USEC": 1,
    # PM_TYPE
    "PM_TYPE_32": 0,
    "PM_TYPE_64": 2,
    "PM_TYPE_AGGREGATE": 7,
    "PM_TYPE_AGGREGATE_STATIC": 8,
    "PM_TYPE_DOUBLE": 5,
    "PM_TYPE_EVENT": 9,
    "PM_TYPE_FLOAT": 4,
    "PM_TYPE_HIGHRES_EVENT": 10,
    "PM_TYPE_NOSUPPORT": -1,
    "PM_TYPE_STRING": 6,
    "PM_TYPE_U32": 1,
    "PM_TYPE_U64": 3,
    "PM_TYPE_UNKNOWN": 255,
    # PM_TZ
    "PM_TZ_MAXLEN": 40,
    # PM_VAL
    "PM_VAL_DPTR": 1,
    "PM_VAL_HDR_SIZE": 4,
    "PM_VAL_INSITU": 0,
    "PM_VAL_SPTR": 2,
    "PM_VAL_VLEN_MAX": 16777215,
    # PM_XTB
    "PM_XTB_FLAG": 16777216,
}

CPMDA: dict[str, int] = {
    # PMDA_ATTR
    "PMDA_ATTR_CONTAINER": 15,
    "PMDA_ATTR_GROUPID": 12,
    "PMDA_ATTR_PROCESSID": 14,
    "PMDA_ATTR_USERID": 11,
    "PMDA_ATTR_USERNAME": 5,
    # PMDA_CACHE
    "PMDA_CACHE_ACTIVE": 8,
    "PMDA_CACHE_ADD": 2,
    "PMDA_CACHE_CHECK": 16,
    "PMDA_CACHE_CULL": 4,
    "PMDA_CACHE_DUMP": 19,
    "PMDA_CACHE_DUMP_ALL": 20,
    "PMDA_CACHE_EMPTY": 5,
    "PMDA_CACHE_HIDE": 3,
    "PMDA_CACHE_INACTIVE": 9,
    "PMDA_CACHE_LOAD": 1,
    "PMDA_CACHE_REORG": 17,
    "PMDA_CACHE_REUSE": 13,
    "PMDA_CACHE_SAVE": 6,
    "PMDA_CACHE_SIZE": 10,
    "PMDA_CACHE_SIZE_ACTIVE": 11,
    "PMDA_CACHE_SIZE_INACTIVE": 12,
    "PMDA_CACHE_SYNC": 18,
    "PMDA_CACHE_WALK_NEXT": 15,
    "PMDA_CACHE_WALK_REWIND": 14,
    # PMDA_FETCH
    "PMDA_FETCH_DYNAMIC": 2,
    "PMDA_FETCH_NOVALUES": 0,
    "PMDA_FETCH_STATIC": 1,
    # PMDA_FLAG
    "PMDA_FLAG_AUTHORIZE": 4,
    "PMDA_FLAG_CONTAINER": 64,
}

#: added by PCP 7.x (``<pcp/pmapi.h>``, ``pmapi.c``); offered to every script
PCP7_CPMAPI: dict[str, int] = {
    "PMAPI_VERSION_4": 4,
    "PMCD_HOSTNAME_CHANGE": 1 << 5,
    "PM_CTXFLAG_SHALLOW": 1 << 8,
    "PM_CTXFLAG_AUTH": 1 << 13,
    "PM_CTXFLAG_CONTAINER": 1 << 14,
    "PM_CTXFLAG_NO_FEATURE_CHECK": 1 << 15,
    "PM_CTXFLAG_METADATA_ONLY": 1 << 16,
    "PM_ERR_ARG": -12345 - 70,
    "PM_PAD_TIMESPEC": 0,
    "PM_UNIT_TEMPERATURE": 1,
    "PM_UNIT_VOLTAGE": 2,
    "PM_UNIT_CURRENT": 3,
    "PM_UNIT_POWER": 4,
    "PM_TEMPERATURE_C": 1,
    "PM_TEMPERATURE_F": 2,
    "PM_TEMPERATURE_K": 3,
    "PM_VOLTAGE_V": 1,
    "PM_VOLTAGE_mV": 2,
    "PM_VOLTAGE_uV": 3,
    "PM_CURRENT_A": 1,
    "PM_CURRENT_mA": 2,
    "PM_CURRENT_uA": 3,
    "PM_POWER_kW": 1,
    "PM_POWER_W": 2,
    "PM_POWER_mW": 3,
    "PM_POWER_uW": 4,
}
CPMAPI.update(PCP7_CPMAPI)


def cpmapi_for(version: tuple[int, int, int]) -> dict[str, int]:
    """The constants as the binding of PCP ``version`` has them: PCP 7
    made PMAPI_VERSION 4 (timespec interfaces)."""
    out = dict(CPMAPI)
    out["PMAPI_VERSION"] = 4 if version >= (7, 0, 0) else 3
    return out
