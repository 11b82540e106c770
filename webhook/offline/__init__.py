"""The offline commands, each judging documents with the same admission chain as ``serve``:
``infergate validate`` (``validate``), ``infergate test`` (``run_suites``), ``infergate audit``
(``audit_command``), ``infergate reconcile`` (``reconcile``) and ``infergate native-policies``
(``native_policies``); each module's docstring says its part."""
