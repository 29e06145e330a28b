"""Process isolation of extensions (SPEC §6), in three parts: ``protocol`` (what
crosses the boundary, known to both sides), ``kernel`` (spawning, confining and
proxying plugin hosts) and ``host`` (the child process).

Deliberately empty: the plugin host imports ``core.extensions.isolation.host.plugin_host``
and must not pay for the kernel side (import contracts keep it so). Kernel code imports
``core.extensions.isolation.kernel.factory`` (``isolated_factory``, ``confinement_report``).
"""
