"""The kubelet plugin's side of gpu-handler: NodePrepareResources and NodeUnprepareResources.

One straight Prepare (:mod:`.prepare`), one Unprepare (:mod:`.unprepare`) and one release order
(:mod:`.release`) shared by a failed prepare's rollback, Unprepare and start-up (:mod:`.startup`);
what a device of each kind needs of the card lives in :mod:`.kinds`, one module per kind. The
node's record of what is prepared is the checkpoint (:mod:`.checkpoint`), read and written only
through :class:`~.services.CheckpointStore` under the node lock.
"""
