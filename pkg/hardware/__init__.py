"""Host hardware adapters: the only code that reads sysfs, procfs, DMI, os-release and pci.ids.

Hardware is reached only through these narrow adapters, and every one of them takes the root it
reads from as an argument (a sysfs root, a file path) instead of hard-coding ``/sys`` or ``/etc``.
That keeps the rest of the project free of file-system knowledge and lets tests and the demo run the
real code against the fixture trees in ``test/fixtures/sysfs/<scenario>/``
(docs/architecture.md#hardware-behind-narrow-adapters): in a container the same code reads the host's files
mounted at, say, ``/host/sys``.

The modules are plain readers with no state and no Kubernetes knowledge:

- :mod:`pkg.hardware.pci`: PCI functions from ``<sysfs>/bus/pci/devices`` (IDs, class, driver binding,
  NUMA node, IOMMU group, SR-IOV);
- :mod:`pkg.hardware.pci_topology`: a function's PCIe root complex and NUMA node, computed as
  Kubernetes computes its standard ``pcieRoot`` and ``numaNode`` attributes;
- :mod:`pkg.hardware.pciids`: names for vendor, device and class IDs from a ``pci.ids`` database;
- :mod:`pkg.hardware.hostinfo`: OS, kernel release and bare metal on positive evidence;
- :mod:`pkg.hardware.labels`: turning those names into valid Kubernetes label values;
- :mod:`pkg.hardware.files`: the one bounded way to read a host file (regular files only, never
  blocking on a FIFO, never past a size limit) that every reader above uses.

Deciding which PCI functions are GPUs, and what to write about them, belongs to the node agent.
"""
