"""The tools on top of the daemon: the Install-time generators (PMNS fragment,
help text, pmlogconf group, pmcd.conf line), ``pmda-py install``, ``remove``
and ``new``, and the demo that drives the daemon as a user would."""
