"""The runtime: the only part of the core that runs on trio.

It opens pmcd's channel (pipe or socket), admits pmcd, drops privileges,
loads the tables off the event loop, and pumps PDUs between the channel and
the sans-IO session and dispatcher (``pmda-py run``)."""
