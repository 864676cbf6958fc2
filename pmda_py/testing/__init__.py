"""Testing a PMDA as pmcd and dbpmda would: a PDU client (``client``), tables
served in-process (``harness``), the pytest plugin (``fixtures``), helpers the
project's tests share (``support``), a dbpmda-compatible harness (``dbpmda``)
and a protocol fuzzer (``fuzz``).  Production code never imports it."""
