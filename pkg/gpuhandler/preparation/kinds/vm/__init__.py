"""The kinds of a VM's devices: a whole card passed through (:mod:`.vfio`) and a vGPU (:mod:`.vgpu`).

Both are for a VM's launcher, never for a container of the vendor's driver, and share what a
launcher reads: the VFIO device nodes (:mod:`.devices`) and the claim's VM files (:mod:`.files`),
built from their records (:mod:`.records`).
"""
