"""Process wiring of the binaries: flags, the shared runtime, and one ``main`` per binary.

``cmd/<binary>/main.py`` and the console scripts call these ``main`` functions; nothing else
imports them. Each ``main`` only wires: parse options, build the runtime, call the controllers'
``setup`` composition roots, run the manager.
"""
