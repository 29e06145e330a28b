"""Process isolation of extensions (SPEC §6): plugin hosts, proxies, confinement.

Deliberately empty: the plugin host imports ``core.extensions.isolation.host``
and must not pay for the kernel side. Kernel code imports
``core.extensions.isolation.factory`` (``isolated_factory``, ``confinement_report``).
"""
